"""The types every step records are written without their default-valued fields
(`workflows.payloads`), so those defaults are frozen: a recorded payload must mean today what it
meant when it was written. This holds every default reachable from `COMPACT_TYPES` against the
committed list, and shows the bytes it saves."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from workflows.model_call_types import ModelCallResult, ModelUsage, TranscriptCursor
from workflows.payloads import COMPACT_TYPES, data_converter
from workflows.tool_call_types import ToolCallResult

FROZEN = Path(__file__).parent.parent / "fixtures" / "payload_defaults.json"
FIX = (
    "defaults of the types written without them are frozen (workflows/payloads.py): a payload "
    "recorded with the old default would change meaning. Keep the default and add a field with "
    "a new name; if a field is new, add its default to tests/fixtures/payload_defaults.json"
)


def _classes(hint: Any) -> list[type]:
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or issubclass(hint, BaseModel)):
        return [hint]
    origin = typing.get_origin(hint)
    if origin is None and not isinstance(hint, types.UnionType):
        return []
    return [found for arg in typing.get_args(hint) for found in _classes(arg)]


def defaults_of(kind: type, seen: dict[str, Any]) -> dict[str, Any]:
    """`module.Class.field: default` for every field with a default, through nested types."""
    name = f"{kind.__module__}.{kind.__qualname__}"
    if any(key.startswith(name + ".") for key in seen) or name in seen:
        return seen
    seen[name] = "(type)"  # the types covered, listed too
    hints = typing.get_type_hints(kind)
    if issubclass(kind, BaseModel):
        for field_name, info in kind.model_fields.items():
            if info.default is not PydanticUndefined:
                seen[f"{name}.{field_name}"] = info.default
            elif info.default_factory is not None:
                seen[f"{name}.{field_name}"] = info.default_factory()  # type: ignore[call-arg]
            for nested in _classes(hints[field_name]):
                defaults_of(nested, seen)
    else:
        for field in dataclasses.fields(kind):
            if field.default is not dataclasses.MISSING:
                seen[f"{name}.{field.name}"] = field.default
            elif field.default_factory is not dataclasses.MISSING:
                seen[f"{name}.{field.name}"] = field.default_factory()
            for nested in _classes(hints[field.name]):
                defaults_of(nested, seen)
    return seen


def current() -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for kind in sorted(COMPACT_TYPES, key=lambda k: k.__qualname__):
        defaults_of(kind, seen)
    return json.loads(json.dumps(seen, default=repr, sort_keys=True))


def test_the_defaults_of_compact_payloads_are_the_ones_recorded_payloads_were_written_with() -> None:
    frozen = json.loads(FROZEN.read_text())
    now = current()
    changed = {k: (frozen[k], now[k]) for k in frozen if k in now and frozen[k] != now[k]}
    assert not changed, f"{FIX}. Changed (was, now): {changed}"
    gone = sorted(set(frozen) - set(now))
    assert not gone, f"{FIX}. Gone: {gone}"
    new = sorted(set(now) - set(frozen))
    assert not new, f"{FIX}. New: {new}"


def test_a_default_valued_field_is_left_out_and_read_back_as_its_default() -> None:
    result = ModelCallResult(
        text="",
        tool_calls=[],
        finish_reason="tool_calls",
        usage=ModelUsage(model="m", prompt_tokens=182, completion_tokens=31, cost_usd=0.0),
        transcript_upto=5,
        max_tokens_used=4096,
        tool_results=[ToolCallResult(ok=True, output="No memories in this channel yet.")],
    )
    converter = data_converter.payload_converter
    [payload] = converter.to_payloads([result])
    written = json.loads(payload.data)
    assert "refused_resumable" not in written and "output_ref" not in written["tool_results"][0]
    assert "cached_tokens" not in written["usage"]
    [read] = converter.from_payloads([payload], [ModelCallResult])
    assert read == result and read.refused_resumable is True
    # Other types are written whole, as before.
    [plain] = converter.to_payloads([TranscriptCursor(upto=3)])
    assert json.loads(plain.data)["view"] == {"summary_upto": 0, "keep_tool_results": 6}
