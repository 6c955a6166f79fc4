"""A tool's arguments, declared as a pydantic model: the base every arguments model extends
(native tools in `activities/tools/`, the workflow's own in `workflows/tools/`), the common
field types, and the canonical JSON schema a `ToolSpec` is made from.

The schema is stable: no titles, and an optional argument may be omitted, never null (see
`canonical_schema`), so its sha256 changes only when the arguments do. Pure data.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from workflows.tool_catalog import canonical_schema

NonEmpty = Annotated[str, Field(min_length=1)]
PositiveInt = Annotated[int, Field(ge=1)]


class ToolArgs(BaseModel):
    """Base of every arguments model: unknown arguments are errors the model hears about."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def arguments_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, canonical: no titles, optional arguments omitted not null."""
    return dict(canonical_schema(model.model_json_schema()))
