"""Eval datasets as a person writes them: the example dataset loads, and each mistake is
reported at its file, line and field with what to write instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from surfaces.evals.dataset_file import DatasetError, load_dataset

REPO = Path(__file__).resolve().parents[2]


def problems(tmp_path: Path, text: str, name: str = "cases.yaml") -> list[str]:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DatasetError) as raised:
        load_dataset(path)
    return [str(p).replace(f"{path}:", "") for p in raised.value.problems]


def test_the_example_dataset_loads_with_the_agents_it_names() -> None:
    dataset = load_dataset(REPO / "evals" / "examples.yaml")
    assert len(dataset.cases) >= 20 and dataset.agent == "helper"
    assert {c.agent for c in dataset.cases} == {None, "dev-platform", "security-reviewer"}
    assert any(c.scripted for c in dataset.cases) and any(c.checks.judge for c in dataset.cases)
    assert dataset.lines["remember-decision"] > 1  # where each case starts, for reports


def test_a_misspelt_field_names_its_line_field_and_the_fix(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        "cases:\n  - id: one\n    request: hi\n    checks:\n      tools_caled: [{tool: memory.save}]\n",
    )
    assert found == [
        "5: cases[0].checks.tools_caled: unknown field; did you mean 'tools_called'? allowed here: "
        "tools_called, tools_not_called, approvals_asked, reply_contains, reply_not_contains, status, "
        "max_cost_usd, max_steps, output_schema, judge"
    ]


def test_matchers_ids_and_duplicates_are_checked_where_they_are(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        "agent: helper\n"
        "cases:\n"
        "  - id: first\n    request: hi\n"
        "  - id: first\n    request: again\n"
        "    checks:\n"
        "      tools_called: [{tool: memory.save, args: {content: {regex: '('}}}]\n"
        "      approvals_asked: [{tool: memory.save, args: {content: {contains: a, equals: b}}}]\n"
        "  - id: Not An Id\n",
    )
    assert found[0].startswith("8: cases[1].checks.tools_called[0].args.content: regex '(' does not compile")
    assert found[1] == (
        "9: cases[1].checks.approvals_asked[0].args.content: give exactly one of equals, contains or "
        "regex, e.g. {contains: deploy}"
    )
    assert "10: cases[2].id: 'Not An Id': use lower-case letters" in found[2]
    assert "10: cases[2].request: required; add `request:`" in found
    assert len(found) == 4  # the second `first` is not a case, so it is no duplicate yet
    twice = problems(
        tmp_path, "- {id: first, request: hi}\n- {id: second, request: hi}\n- {id: first, request: x}\n"
    )
    assert twice == ["3: id: 'first' is first used on line 1; give every case its own id"]


def test_an_output_schema_must_be_a_json_schema(tmp_path: Path) -> None:
    found = problems(tmp_path, "- id: a\n  request: hi\n  checks:\n    output_schema: {type: objekt}\n")
    assert len(found) == 1 and found[0].startswith("4: [0].checks.output_schema: not a JSON Schema (")


def test_jsonl_names_the_line_of_each_bad_case(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        '{"id": "a", "request": "x"}\n'
        '{"id": "b", "request": \n'
        '{"id": "c", "approve": "maybe", "request": "y"}\n',
        "cases.jsonl",
    )
    assert found[0] == "2: not JSON (Expecting value at column 24); write one case object per line"
    assert found[1].startswith("3: approve: ")


def test_shorthand_matchers_and_yes_no_read_as_written(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(
        "- id: a\n  request: hi\n  approve: yes\n"
        "  checks: {tools_called: [{tool: github.comment, args: {number: 12, body: {contains: fix}}}]}\n"
    )
    case = load_dataset(path).cases[0]
    assert case.approve is True
    args = case.checks.tools_called[0].args
    assert args["number"].equals == 12 and args["body"].contains == "fix"


def test_a_file_that_is_not_yaml_or_has_no_cases_says_so(tmp_path: Path) -> None:
    assert problems(tmp_path, "cases: [\n")[0].startswith("2: not valid YAML")
    assert problems(tmp_path, "agent: helper\n") == [
        "1: cases: add at least one case: a list of {id, request, checks}"
    ]
