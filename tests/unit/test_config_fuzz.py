"""Property tests: whatever a user writes, loading gives configs or an AgentConfigError
whose every problem names a field (with a line) or says the document itself is wrong.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.loader import EXAMPLES_DIR, AgentConfigError, parse_agent_documents

VALID_TEXT = (EXAMPLES_DIR / "dev-platform.yaml").read_text()
VALID: dict[str, Any] = yaml.safe_load(VALID_TEXT)

# Problems about the whole document rather than one field start with one of these.
DOCUMENT_LEVEL = ("not valid YAML", "not an agent document", "no agent documents")

FUZZ = settings(
    max_examples=200,
    deadline=None,
    database=None,  # nothing written into the work tree
    suppress_health_check=[HealthCheck.too_slow],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["72h", "0m", "acme/x", "memory.save", "issues:write", "channel", "-1"]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=8) | st.integers(-5, 5), inner, max_size=3)
    ),
    max_leaves=6,
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in a parsed YAML tree."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, (*prefix, index))
    return found


def parent_and_key(document: Any, path: tuple[Any, ...]) -> tuple[Any, Any]:
    node = document
    for key in path[:-1]:
        node = node[key]
    return node, path[-1]


def check(text: str) -> None:
    """Loading `text` either works or fails with well-formed problems, never anything else."""
    try:
        configs = parse_agent_documents(text, "fuzz.yaml")
    except AgentConfigError as exc:
        assert exc.problems, "an error with no problems"
        for problem in exc.problems:
            assert problem.file == "fuzz.yaml"
            if problem.field:
                assert problem.line is not None and problem.line >= 1, str(problem)
            else:
                assert problem.message.startswith(DOCUMENT_LEVEL), str(problem)
            assert problem.message, str(problem)
    else:
        assert configs


@FUZZ
@given(data=st.data())
def test_mutated_documents_fail_only_with_named_problems(data: st.DataObject) -> None:
    document = copy.deepcopy(VALID)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        current = paths(document)
        action = data.draw(st.sampled_from(["delete", "replace", "add"]), label="action")
        if not current:
            break
        path = data.draw(st.sampled_from(current), label="path")
        parent, key = parent_and_key(document, path)
        if action == "delete":
            del parent[key]
        elif action == "replace":
            parent[key] = data.draw(values, label="value")
        else:
            target = parent[key] if isinstance(parent[key], dict) else parent
            if isinstance(target, dict):
                target[data.draw(st.text(max_size=10), label="new key")] = data.draw(values)
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    check(text)


@FUZZ
@given(text=st.text(max_size=200))
def test_random_text_fails_only_with_named_problems(text: str) -> None:
    check(text)


yaml_bits = st.sampled_from(
    [":", "-", " ", "\n", "  ", "[", "]", "{", "}", ",", "#", "&a", "*a", "!!int", "!!binary",
     "? ", "|", ">", "'", '"', "---\n", "...\n", "2001-02-30", "1e400", "~", "spec", "tools"]
)  # fmt: skip


@FUZZ
@given(data=st.data())
def test_corrupted_valid_text_fails_only_with_named_problems(data: st.DataObject) -> None:
    text = VALID_TEXT
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        at = data.draw(st.integers(0, len(text)), label="position")
        cut = data.draw(st.integers(0, 20), label="cut")
        insert = "".join(data.draw(st.lists(yaml_bits | st.text(max_size=3), max_size=4)))
        text = text[:at] + insert + text[at + cut :]
    check(text)


def test_checker_accepts_the_valid_document() -> None:
    check(VALID_TEXT)
    assert (
        len(
            parse_agent_documents(
                VALID_TEXT + "---\n" + VALID_TEXT.replace("name: dev-platform", "name: other"),
                "two.yaml",
            )
        )
        == 2
    )
