"""How OpenLoop's payloads are written: pydantic's JSON, and for the types every step
records (a model call's input and result, a tool call's input and result) without the fields
that hold their default value. A local-tool step's history is about 300 bytes smaller.

A payload written this way means what it says only while those defaults stay what they were
when it was written: they are frozen. `tests/unit/test_payload_defaults.py` holds every default
reachable from `COMPACT_TYPES` against `tests/fixtures/payload_defaults.json` and fails when one
changes; a new meaning takes a new field. Readers decode with the type (the SDK, the timeline,
the export), so a field left out reads as its default. Workflow-safe: no I/O, deterministic.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)

from workflows.adapter_cache import SharedAdapters
from workflows.model_call_types import ModelCallInput, ModelCallResult
from workflows.tool_call_types import ToolCallInput, ToolCallResult

COMPACT_TYPES: frozenset[type] = frozenset({ModelCallInput, ModelCallResult, ToolCallInput, ToolCallResult})
_ADAPTERS: dict[type, TypeAdapter[Any]] = {kind: TypeAdapter(kind) for kind in COMPACT_TYPES}


class CompactJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """pydantic's JSON; `COMPACT_TYPES` (and what they hold) without default-valued fields."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._type_adapter = SharedAdapters(self._type_adapter)  # type: ignore[assignment]

    def to_payload(self, value: Any) -> Payload | None:
        adapter = _ADAPTERS.get(type(value))
        if adapter is None:
            return super().to_payload(value)
        data = adapter.dump_json(value, exclude_defaults=True)
        return Payload(metadata={"encoding": self.encoding.encode()}, data=data)


class OpenLoopPayloadConverter(CompositePayloadConverter):
    def __init__(self) -> None:
        compact = CompactJSONPayloadConverter()
        super().__init__(
            *(
                compact if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


data_converter = DataConverter(payload_converter_class=OpenLoopPayloadConverter)
