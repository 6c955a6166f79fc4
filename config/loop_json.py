"""Read `openloop.json`, the loop file of the thu-nmrc loop toolkit, as a `kind: Loop`.

That file (`version: 1`) describes the same loop as ours (mission, play/scan/fix/verify/
improve commands with the same placeholders, a baseline metric, rounds and limits) in other
words: `total_rounds` and `project_root` at the top, `limits.*_seconds`, `baseline.enabled`.
`read_json_loop` moves each key to the loop field that means the same and returns the
`kind: Loop` document, the warnings for keys that mean nothing here (named, never refused),
and where each field came from, so a problem names the JSON key and line the person wrote.
`config.loop_convert` writes the same document as YAML. Pydantic and YAML only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from config.loop import LoopFile, _spec, _worded
from config.problems import AgentConfigError, ConfigProblem, Loc, field_path
from config.yaml_nodes import line_of, read_text_file
from workflows.loop_types import LoopSpec

__all__ = ["JSON_LOOP_NAME", "JsonLoop", "load_json_loop", "parse_json_loop", "read_json_loop"]

JSON_LOOP_NAME = "openloop.json"
_VERSION = 1
_STEPS = ("play", "scan", "fix", "verify", "improve")
_BASELINE = ("command", "metric_name", "regex", "value", "direction")
# openloop.json key -> (our field under spec, why the line changed; "" when only its place did)
_MOVED: dict[Loc, tuple[Loc, str]] = {
    ("mission",): (("mission", "objective"), ""),
    ("total_rounds",): (("limits", "total_rounds"), ""),
    ("project_root",): (("repo", "path"), "read from this file's folder"),
    ("limits", "command_timeout_seconds"): (("limits", "command_timeout"), "seconds"),
    ("limits", "stall_timeout_seconds"): (("limits", "stall_timeout"), "seconds"),
    ("limits", "max_consecutive_failures"): (("limits", "max_consecutive_failures"), ""),
}
_MOVED |= {("commands", step): (("commands", step), "") for step in _STEPS}
_MOVED |= {("baseline", key): (("baseline", key), "") for key in _BASELINE}
# A field missing as a whole is reported at the JSON key its fields come from.
_PARENTS: dict[Loc, Loc] = {
    ("spec", "mission"): ("mission",),
    ("spec", "repo"): ("project_root",),
    ("spec", "commands"): ("commands",),
    ("spec", "baseline"): ("baseline",),
    ("spec", "limits"): ("limits",),
}
_NAME_CHARS = re.compile(r"[^a-z0-9]+")


@dataclass
class JsonLoop:
    """An openloop.json read as a `kind: Loop` document, with what changed on the way."""

    document: dict[str, Any]
    warnings: list[ConfigProblem] = field(default_factory=list)
    came_from: dict[Loc, Loc] = field(default_factory=dict)  # our field -> its JSON key
    notes: dict[Loc, str] = field(default_factory=dict)  # our field -> why its line changed
    node: yaml.Node | None = None  # the JSON composed as YAML, for line numbers


def loop_name(path: Path) -> str:
    """A loop name for a JSON file, which has none: its folder's (`.openloop/demo/openloop.json`
    is `demo`) or, for a file named otherwise, its own (`openloop.demo.json`)."""
    stem = path.stem if path.name != JSON_LOOP_NAME else path.resolve().parent.name
    name = _NAME_CHARS.sub("-", stem.lower()).strip("-")[:63].strip("-")
    return name or "openloop"


def _node(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None  # JSON that YAML does not take (tabs): no line numbers, nothing else lost


def _parsed(text: str, source: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problem = ConfigProblem(source, exc.lineno, "", f"not valid JSON: {exc.msg} (column {exc.colno})")
        raise AgentConfigError([problem]) from None
    if not isinstance(data, dict):
        expected = f"expected a JSON object with version, mission and commands (got {type(data).__name__})"
        raise AgentConfigError([ConfigProblem(source, 1, "", expected)])
    return data


def read_json_loop(text: str, source: str, name: str) -> JsonLoop:
    """The `kind: Loop` document an openloop.json describes; see the module docstring."""
    data = _parsed(text, source)
    node = _node(text)
    found = JsonLoop(
        {"apiVersion": "openloop.ai/v1alpha1", "kind": "Loop", "metadata": {"name": name}}, node=node
    )
    found.notes[("metadata", "name")] = "openloop.json has no name: its file's or folder's"
    version = data.get("version")
    if version != _VERSION:
        line = line_of(node, ("version",))
        problem = (
            f"{version!r} is not a version this reader knows; write 1 (openloop.json's format)"
            if "version" in data
            else 'required key is missing; add "version": 1'
        )
        raise AgentConfigError([ConfigProblem(source, line, "version", problem)])
    found.notes[("apiVersion",)] = f'from "version": {_VERSION}'
    spec: dict[str, Any] = {}
    if "project_root" not in data:
        data = {**data, "project_root": "."}
        found.warnings.append(
            ConfigProblem(source, 1, "project_root", "not set: the file's folder is repaired")
        )
    baseline = data.get("baseline")
    enabled = not isinstance(baseline, dict) or baseline.get("enabled", True) is not False
    for key, value in data.items():
        if key == "version":
            continue
        if key == "baseline" and not enabled:
            found.notes[("spec", "baseline")] = 'not carried: "enabled": false'
        elif key in ("commands", "limits", "baseline"):
            found.came_from[("spec", key)] = (key,)
            if key == "baseline":
                found.notes[("spec", key)] = '"enabled": true (a baseline block here is on)'
            if not isinstance(value, dict):
                spec[key] = value  # the reader says what is expected here
                continue
            spec.setdefault(key, {})
            for inner, inner_value in value.items():
                _move(found, spec, (key, inner), inner_value, source)
        else:
            _move(found, spec, (key,), value, source)
    found.document["spec"] = spec
    return found


def _move(found: JsonLoop, spec: dict[str, Any], key: Loc, value: Any, source: str) -> None:
    if key == ("baseline", "enabled"):
        if value is not True:
            _warn(found, key, source, f"{value!r} is not true or false; the baseline is read as enabled")
        return
    if key not in _MOVED:
        _warn(found, key, source, "has no meaning here; not carried")
        return
    target, note = _MOVED[key]
    where = spec
    for part in target[:-1]:
        where = where.setdefault(str(part), {})
    where[str(target[-1])] = value
    ours = ("spec", *target)
    found.came_from[ours] = key
    if target != key or note:
        found.notes[ours] = f'from "{field_path(key)}"' + (f" ({note})" if note else "")
    elif key[0] == "commands" and isinstance(value, str) and "{workspace}" in value:
        # openloop.json's workspace is its state folder; ours has one folder, the checkout.
        found.notes[ours] = "{workspace} is the checkout being repaired here, as {project_root} is"


def _warn(found: JsonLoop, key: Loc, source: str, message: str) -> None:
    line = line_of(found.node, key)
    found.warnings.append(ConfigProblem(source, line, field_path(key), message))


def _json_key(found: JsonLoop, loc: Loc) -> Loc:
    """The JSON key a field of ours came from (or would): the longest known prefix of `loc`."""
    for length in range(len(loc), 1, -1):
        if loc[:length] in found.came_from:
            return found.came_from[loc[:length]] + loc[length:]
        if loc[:length] in _PARENTS:
            parent = _PARENTS[loc[:length]]
            return parent if parent in (("mission",), ("project_root",)) else parent + loc[length:]
    return loc


def validated(found: JsonLoop, source: str) -> LoopFile:
    """The document as a checked `LoopFile`; every problem named at the JSON key and line."""
    try:
        return LoopFile.model_validate(found.document)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            for loc, message in _worded(dict(error)):
                key = _json_key(found, loc)
                if error["type"] == "missing":
                    message = f'required key is missing; add "{key[-1]}"'
                problems.append(ConfigProblem(source, line_of(found.node, key), field_path(key), message))
        raise AgentConfigError(
            sorted(dict.fromkeys(problems), key=lambda p: (p.line or 0, p.field))
        ) from None


def parse_json_loop(
    text: str, source: str, base_dir: str | Path, name: str, *, check_paths: bool = False
) -> tuple[LoopSpec, list[ConfigProblem]]:
    """The loop an openloop.json describes and the warnings for the keys it left behind."""
    found = read_json_loop(text, source, name)
    fields = validated(found, source)
    root = fields.spec.repo.path or "."
    repo_path = str((Path(base_dir) / Path(root).expanduser()).resolve())
    if check_paths and not Path(repo_path).is_dir():
        message = f"no directory at {repo_path} (a relative project_root is read from the file's folder)"
        problem = ConfigProblem(source, line_of(found.node, ("project_root",)), "project_root", message)
        raise AgentConfigError([problem])
    return _spec(fields, source, repo_path, base_dir), found.warnings


def load_json_loop(path: str | Path) -> tuple[LoopSpec, list[ConfigProblem]]:
    """The loop in an openloop.json file (its project must exist), and its warnings."""
    path = Path(path)
    return parse_json_loop(
        read_text_file(path), str(path), path.resolve().parent, loop_name(path), check_paths=True
    )
