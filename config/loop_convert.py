"""`openloop loops convert openloop.json`: the same loop written as a `kind: Loop` YAML file.

Each line whose key or shape changed carries a comment naming the JSON key it came from; the
keys that could not be carried are listed as comments at the end, and the sandbox our loops
add (openloop.json's commands ran on the host) is written out so it is seen. The text is read
back with `config.loop.parse_loop` before it is returned: a conversion that would not load
is never written. Pydantic and YAML only.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import yaml

from config.loop import parse_loop
from config.loop_json import JsonLoop, loop_name, read_json_loop, validated
from config.problems import Loc
from config.yaml_nodes import read_text_file

__all__ = ["convert_json_loop"]

_HEADER = (
    "# Converted from {source} by `openloop loops convert`. A comment says where a changed line\n"
    "# came from; `openloop loops doctor` checks the result."
)
_SANDBOX = (
    "  # Not in openloop.json, whose commands ran on the host: ours run in bubblewrap with no\n"
    "  # network. `provider: none` runs them unconfined, as before.\n"
    "  sandbox:\n"
    "    provider: bubblewrap\n"
    "    network: false"
)

_ORDER = ("mission", "repo", "commands", "baseline", "limits")  # as `openloop loops init` writes them


def _scalar(value: Any) -> str:
    """One YAML scalar on one line (quoted when plain text would read otherwise)."""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)  # 900.0 seconds reads as 900
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=math.inf)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _lines(found: JsonLoop, value: Any, loc: Loc, indent: int) -> list[str]:
    lines = []
    for key, inner in value.items():
        here = (*loc, key)
        note = found.notes.get(here)
        comment = f"  # {note}" if note else ""
        pad = "  " * indent
        if isinstance(inner, dict):
            lines.append(f"{pad}{key}:{comment}")
            lines += _lines(found, inner, here, indent + 1)
        else:
            lines.append(f"{pad}{key}: {_scalar(inner)}{comment}")
    return lines


def convert_json_loop(path: str | Path, out_dir: str | Path) -> str:
    """The YAML loop file for the openloop.json at `path`, to be written in `out_dir` (a
    relative project path is rewritten to be read from there)."""
    path = Path(path)
    found = read_json_loop(read_text_file(path), str(path), loop_name(path))
    validated(found, str(path))  # its problems named at the JSON keys, before any YAML exists
    spec = found.document["spec"]
    root = Path(spec["repo"]["path"]).expanduser()
    absolute = root if root.is_absolute() else (path.resolve().parent / root).resolve()
    spec["repo"]["path"] = os.path.relpath(absolute, Path(out_dir).resolve())
    body = _lines(found, {k: v for k, v in found.document.items() if k != "spec"}, (), 0)
    ordered = {key: spec[key] for key in _ORDER if key in spec}
    body += ["spec:", *_lines(found, ordered, ("spec",), 1), _SANDBOX]
    baseline_note = found.notes.get(("spec", "baseline"))
    dropped = [f'#   "{w.field}": {w.message}' for w in found.warnings if w.field != "project_root"]
    dropped += [f'#   "baseline": {baseline_note}'] if baseline_note and "baseline" not in spec else []
    tail = ["", "# Not carried from the JSON file:", *dropped] if dropped else []
    text = "\n".join([_HEADER.format(source=path.name), *body, *tail]) + "\n"
    parse_loop(text, str(Path(out_dir) / "loop.yaml"), out_dir)  # must read back as written
    return text
