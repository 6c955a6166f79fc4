"""A tool's arguments, declared as a pydantic model: the base every arguments model extends
(native tools in `activities/tools/`, the workflow's own in `workflows/tools/`), the common
field types, and the canonical JSON schema a `ToolSpec` is made from.

The schema is stable: no titles, and an optional argument may be omitted, never null (see
`canonical_schema`), so its sha256 changes only when the arguments do. Pure data.
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from workflows.adapter_cache import process_wide
from workflows.tool_catalog import canonical_schema

NonEmpty = Annotated[str, Field(min_length=1)]
PositiveInt = Annotated[int, Field(ge=1)]


class ToolArgs(BaseModel):
    """Base of every arguments model: unknown arguments are errors the model hears about."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def arguments_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, canonical: no titles, optional arguments omitted not null."""
    if process_wide(model):  # the workflow's tools declare theirs in every run: work it out once
        return json.loads(_schema_text(model))  # a copy of its own for every caller
    return dict(canonical_schema(model.model_json_schema()))


@functools.lru_cache(maxsize=256)  # bounded: a test may declare models of its own
def _schema_text(model: type[BaseModel]) -> str:
    return json.dumps(canonical_schema(model.model_json_schema()))
