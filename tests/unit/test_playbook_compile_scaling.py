"""A playbook's compile does work in proportion to its steps: each step file is parsed once,
by libyaml when there is one, and the reference checks walk a bounded number of steps per
reference wherever in a long chain the referenced step is. Counted, never timed (the times
belong to `python -m bench.playbook_compile`). YAML errors keep the pure-Python wording."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.playbook_compile import write_chain
from config.playbooks import compile_playbooks, compiler, limits, step_files, yaml_text
from config.playbooks.graph import Graph, build_graph
from config.playbooks.step_files import StepFile
from config.playbooks.yaml_text import YamlDoc


class CountingAfter(dict[str, tuple[str, ...]]):
    """A graph's `after:` edges that count each step a walk looks up."""

    looked_up = 0

    def get(self, key: str, default: Any = None) -> Any:
        self.looked_up += 1
        return super().get(key, default)

    def __getitem__(self, key: str) -> tuple[str, ...]:
        self.looked_up += 1
        return super().__getitem__(key)


def _step(name: str, after: tuple[str, ...]) -> StepFile:
    data = {"after": list(after)} if after else {"on": "Incident"}
    return StepFile(name, f"{name}.md", YamlDoc(f"{name}.md", None, data, 1), "", 3, after=after)


def _counted(graph: Graph) -> CountingAfter:
    graph.after = CountingAfter(graph.after)
    return graph.after


def test_a_reference_anywhere_up_a_long_chain_is_answered_without_walking_the_chain() -> None:
    length = 4_000
    names = [f"s{i:05d}" for i in range(length)]
    steps = {name: _step(name, (names[i - 1],) if i else ()) for i, name in enumerate(names)}
    graph, problems = build_graph("long", steps)
    assert problems == []
    after = _counted(graph)
    for i in range(4, length):
        assert graph.is_upstream(names[0], names[i])  # the entry
        assert graph.is_upstream(names[i - 1], names[i])  # the parent
        assert graph.is_upstream(names[i - 3], names[i])  # three back
        assert not graph.is_upstream(names[i], names[i - 1])  # downstream
    # The walk of old from each step to the entry looked up 8 million steps here.
    assert after.looked_up <= 6 * length, after.looked_up


def _walked(after: dict[str, tuple[str, ...]], name: str, of: str) -> bool:
    seen: set[str] = set()
    todo = list(after.get(of, ()))
    while todo:
        step = todo.pop()
        if step == name:
            return True
        if step not in seen:
            seen.add(step)
            todo.extend(after.get(step, ()))
    return False


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_upstream_in_a_tangled_graph_is_what_a_full_walk_finds(seed: int) -> None:
    # Several parents each, a step that never runs (its parent is missing) and one in a cycle:
    # the shortcuts answer every pair as walking every `after:` edge does.
    rng = random.Random(seed)
    names = [f"n{i:02d}" for i in rng.sample(range(100), 40)]
    edges = {names[0]: ()} | {
        name: tuple(rng.sample(names[:i], min(i, rng.randint(1, 3)))) for i, name in enumerate(names) if i
    }
    edges["lost"], edges["loop-a"], edges["loop-b"] = ("nowhere",), ("loop-b", names[0]), ("loop-a",)
    edges["after-lost"] = ("lost", names[1])
    graph, _ = build_graph("tangled", {name: _step(name, after) for name, after in edges.items()})
    assert "lost" not in graph.rank and "after-lost" not in graph.rank and len(graph.rank) == 40
    for of in edges:
        for name in edges:
            assert graph.is_upstream(name, of) == _walked(graph.after, name, of), (name, of)


def test_compiling_a_chain_parses_each_file_once_and_walks_a_bounded_number_of_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_STEPS_PER_PLAYBOOK", 10_000)
    parsed, slow, walked = [0], [0], []
    load_yaml, load_slowly, build = yaml_text.load_yaml, yaml_text._load_slowly, compiler.build_graph

    def counting_load(*args: Any, **kwargs: Any) -> Any:
        parsed[0] += 1
        return load_yaml(*args, **kwargs)

    def counting_slow(*args: Any, **kwargs: Any) -> Any:
        slow[0] += 1
        return load_slowly(*args, **kwargs)

    def counting_build(*args: Any, **kwargs: Any) -> Any:
        graph, problems = build(*args, **kwargs)
        walked.append(_counted(graph))
        return graph, problems

    monkeypatch.setattr(step_files, "load_yaml", counting_load)
    monkeypatch.setattr(yaml_text, "_load_slowly", counting_slow)
    monkeypatch.setattr(compiler, "build_graph", counting_build)
    for length in (250, 1_000):
        root = tmp_path / str(length) / "playbooks"
        write_chain(root, length)  # each step references its parent's output and the entry's
        parsed[0], walked[:] = 0, []
        report = compile_playbooks(root, {"coder"})
        assert report.ok, report.errors[:3]
        assert [len(playbook.steps) for playbook in report.playbooks] == [length]
        assert parsed[0] == length  # each step file once
        [after] = walked
        assert after.looked_up <= 2 * length, (length, after.looked_up)
    assert slow[0] == (0 if yaml.__with_libyaml__ else 2 * (1 + 250 + 1_000))  # + registry.yaml


@pytest.mark.parametrize(
    ("front", "line", "wording"),
    [
        ("agent: coder\noutput: {title: str\n", 4, "expected ',' or '}', but got '<stream end>'"),
        ("agent:\tcoder\n", 2, "found character '\\t' that cannot start any token"),
    ],
)
def test_a_step_that_is_not_yaml_is_reported_in_the_same_words_as_before(
    tmp_path: Path, front: str, line: int, wording: str
) -> None:
    root = tmp_path / "playbooks"
    (root / "triage").mkdir(parents=True)
    (root / "registry.yaml").write_text("events:\n  Incident:\n    fields: {title: str}\n")
    (root / "triage" / "look.md").write_text("---\non: Incident\nagent: coder\n---\nLook.\n")
    (root / "triage" / "next.md").write_text(f"---\n{front}---\nNext.\n")
    problems = [str(p) for p in compile_playbooks(root, {"coder"}).errors]
    assert problems == [
        f"{root / 'triage' / 'next.md'}:{line}: not valid YAML: {wording} "
        "(quote a value that holds ': ' or starts with a special character)"
    ]


def _lines(node: yaml.Node) -> Iterator[tuple[str, int, int]]:
    yield node.tag, node.start_mark.line, node.start_mark.column
    children = node.value if isinstance(node.value, list) else []
    for child in children:
        for part in child if isinstance(child, tuple) else (child,):
            yield from _lines(part)


def test_libyaml_reads_a_step_as_the_pure_python_parser_does() -> None:
    front = (
        'on: cron("0 3 * * *")\nafter: [a, b]\nagent: scanner\napproval: required\nbudget: $0.50\n'
        "output: {verdict: enum[pass, fail], url: str?, n: int}\nemits: {event: X, when: 'verdict == fail'}\n"
        "description: |\n  two\n  lines\nflags: [yes, no, on, off, true, False, 2024-01-01, 1.5, ~]\n"
    )
    quoted = yaml_text._quote_types(front)  # what load_yaml hands either parser
    fast, slow = yaml_text.load_yaml(front, "s.md", 2), yaml_text._load_slowly(quoted, "s.md", 2)
    assert fast[0] is not None and slow[0] is not None and fast[1] == slow[1] == []
    assert fast[0].data == slow[0].data and fast[0].data["flags"][:2] == ["yes", "no"]
    assert fast[0].node is not None and slow[0].node is not None
    assert list(_lines(fast[0].node)) == list(_lines(slow[0].node))
