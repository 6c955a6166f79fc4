"""Reading a dataset file: YAML (a list of cases, or `{agent:, cases:}`) or JSONL (one case
per line), every problem reported as file, line, field and what to write instead, the way the
agent loader reports them (`config.problems`, `config.yaml_nodes`)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from config.problems import AgentConfigError, ConfigProblem, Loc, field_path
from config.yaml_nodes import duplicate_keys, line_of, read_text_file, yaml_documents
from surfaces.evals.dataset import Case, Dataset

__all__ = ["DatasetError", "load_dataset"]


class DatasetError(Exception):
    """Problems in a dataset file; `str()` lists each as file:line: field: message."""

    def __init__(self, problems: list[ConfigProblem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def _problems(exc: ValidationError, source: str, line: Any, prefix: Loc = ()) -> list[ConfigProblem]:
    found = []
    for error in exc.errors():
        loc: Loc = (*prefix, *(p for p in error["loc"] if not str(p).startswith("function-")))
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = _unknown(loc[len(prefix) :])
        elif error["type"] == "missing":
            message = f"required; add `{loc[-1]}:`"
        found.append(ConfigProblem(source, line(loc), field_path(loc), message))
    return found


def _unknown(loc: Loc) -> str:
    allowed = _allowed(loc)
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1) if loc else []
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown field; {hint}allowed here: {', '.join(allowed) or '(see the dataset format)'}"


def _allowed(loc: Loc) -> list[str]:
    model: type[BaseModel] | None = Case
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        info = model.model_fields.get(str(part))
        annotation = info.annotation if info else None
        args = getattr(annotation, "__args__", ())
        model = next(
            (a for a in (annotation, *args) if isinstance(a, type) and issubclass(a, BaseModel)), None
        )
    return list(model.model_fields) if model else []


def _parse_case(raw: Any, source: str, line: Any, prefix: Loc) -> Case | list[ConfigProblem]:
    if not isinstance(raw, dict):
        return [
            ConfigProblem(
                source,
                line(prefix),
                field_path(prefix) or "case",
                "a case is a mapping with id, request, checks",
            )
        ]
    try:
        return Case.model_validate(raw)
    except ValidationError as exc:
        return _problems(exc, source, line, prefix)


def _from_yaml(text: str, source: str) -> Dataset:
    documents = yaml_documents(text, source)
    if len(documents) != 1:
        raise DatasetError(
            [ConfigProblem(source, None, "", "write one YAML document: a list of cases or {cases: [...]}")]
        )
    node, data = documents[0]
    problems = [ConfigProblem(source, at, field_path(loc), why) for loc, at, why in duplicate_keys(node)]
    agent: str | None = None
    prefix: Loc = ()
    if isinstance(data, dict):
        unknown = set(data) - {"agent", "cases"}
        for key in sorted(unknown, key=str):
            problems.append(
                ConfigProblem(source, line_of(node, (key,)), str(key), "unknown field; allowed: agent, cases")
            )
        agent = data.get("agent") if isinstance(data.get("agent"), str) else None
        data, prefix = data.get("cases"), ("cases",)
    if not isinstance(data, list) or not data:
        raise DatasetError(
            [
                *problems,
                ConfigProblem(
                    source,
                    line_of(node, prefix),
                    "cases",
                    "add at least one case: a list of {id, request, checks}",
                ),
            ]
        )
    cases: list[Case] = []
    lines: list[int] = []
    for index, raw in enumerate(data):
        parsed = _parse_case(raw, source, lambda loc: line_of(node, loc), (*prefix, index))
        if isinstance(parsed, list):
            problems.extend(parsed)
        else:
            cases.append(parsed)
            lines.append(line_of(node, (*prefix, index, "id")) or 0)
    return _checked(Dataset(source=source, agent=agent, cases=cases), lines, problems)


def _from_jsonl(text: str, source: str) -> Dataset:
    problems: list[ConfigProblem] = []
    cases: list[Case] = []
    lines: list[int] = []
    for number, row in enumerate(text.splitlines(), 1):
        if not row.strip():
            continue
        try:
            raw = json.loads(row)
        except json.JSONDecodeError as exc:
            problems.append(
                ConfigProblem(
                    source,
                    number,
                    "",
                    f"not JSON ({exc.msg} at column {exc.colno}); write one case object per line",
                )
            )
            continue
        parsed = _parse_case(raw, source, lambda _loc, n=number: n, ())
        if isinstance(parsed, list):
            problems.extend(parsed)
        else:
            cases.append(parsed)
            lines.append(number)
    if not cases and not problems:
        problems.append(ConfigProblem(source, None, "", "empty; write one case object per line"))
    return _checked(Dataset(source=source, cases=cases), lines, problems)


def _checked(dataset: Dataset, lines: list[int], problems: list[ConfigProblem]) -> Dataset:
    seen: dict[str, int] = {}
    for case, line in zip(dataset.cases, lines, strict=True):
        if case.id in seen:
            first = f"first used on line {seen[case.id]}" if seen[case.id] else "used before"
            message = f"{case.id!r} is {first}; give every case its own id"
            problems.append(ConfigProblem(dataset.source, line or None, "id", message))
        seen.setdefault(case.id, line)
    if problems:
        raise DatasetError(problems)
    dataset.lines = seen
    return dataset


def load_dataset(path: Path, kind: Literal["yaml", "jsonl"] | None = None) -> Dataset:
    """The dataset at `path` (`.jsonl` is JSON lines, anything else YAML), or DatasetError."""
    try:
        text = read_text_file(path)
    except AgentConfigError as exc:  # the config reader's error already names the file
        raise DatasetError(exc.problems) from None
    if (kind or ("jsonl" if path.suffix == ".jsonl" else "yaml")) == "jsonl":
        return _from_jsonl(text, str(path))
    try:
        return _from_yaml(text, str(path))
    except AgentConfigError as exc:  # not YAML at all: yaml_documents names the line
        raise DatasetError(exc.problems) from None
