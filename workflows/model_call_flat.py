"""The shape the model activity's input had before its fields were grouped into `cursor` and
`budget`. Histories recorded then hold it, and callers may still pass it positionally: both
are lifted into the groups when `ModelCallInput` validates. Permanent: payloads of this shape
stay in histories. Pure; no imports of our own."""

from __future__ import annotations

from typing import Any

_FLAT_BUDGET_FIELDS = (
    "max_tokens",
    "usd_headroom",
    "token_headroom",
    "on_exceeded",
    "monthly_usd",
    "channel_monthly_usd",
)
_FLAT_CURSOR_FIELDS = {"transcript_upto": "upto", "new_messages": "new_messages", "view": "view"}
FLAT_ORDER = (
    "task_id",
    "step",
    "agent_name",
    "workspace",
    "channel",
    "surface",
    "models",
    "transcript_upto",
    "new_messages",
    "tool_names",
    "max_tokens",
    "usd_headroom",
    "token_headroom",
    "on_exceeded",
    "view",
    "purpose",
    "timeout_seconds",
    "monthly_usd",
    "channel_monthly_usd",
    "run_first",
)


def lift_flat_fields(data: Any) -> Any:
    """The flat fields of `data` moved into `budget` and `cursor`; other data as it is."""
    if not isinstance(data, dict):
        return data
    budget = {name: data[name] for name in _FLAT_BUDGET_FIELDS if name in data}
    cursor = {new: data[old] for old, new in _FLAT_CURSOR_FIELDS.items() if old in data}
    if not budget and not cursor:
        return data
    if (budget and "budget" in data) or (cursor and "cursor" in data):
        raise ValueError("give either the grouped fields (budget, cursor) or the flat ones, not both")
    lifted = {k: v for k, v in data.items() if k not in _FLAT_BUDGET_FIELDS and k not in _FLAT_CURSOR_FIELDS}
    if budget:
        lifted["budget"] = budget
    if cursor:
        lifted["cursor"] = cursor
    return lifted
