"""The usage ledger (one row per model call) and the audit trail (tool calls, approvals,
operator actions): the write side. The queries behind `openloop usage` and
`GET /usage|/audit` are in `activities.store.ledger_reports`.

`write_usage` and `write_audit` take an open connection so a caller can put them in its
own transaction; each is idempotent on (task_id, key), so a retried activity writes its row
once. Audit rows never hold raw arguments: a sha256 of their canonical JSON (to tie a
decision to the exact action) and a redacted, truncated preview for people.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection

from workflows.types import AuditEvent

SECRET_KEY_HINTS = ("token", "key", "secret", "password", "passwd", "authorization", "cookie")
# Token shapes that must not reach a preview even under an innocent key name.
_TOKEN_VALUE = re.compile(
    r"(xox[abposr]-[\w-]{6,}|gh[pousr]_\w{12,}|github_pat_\w{12,}|sk-[\w-]{12,}|Bearer\s+\S{8,})"
)
MASK = "***"
PREVIEW_VALUE_CHARS = 160
PREVIEW_LIST_ITEMS = 20
PREVIEW_DEPTH = 4


@dataclass(frozen=True)
class UsageRow:
    """One model call's usage; `key` is unique within the task (default `model:<step>`)."""

    task_id: str
    step: int
    agent: str
    workspace: str
    channel: str
    surface: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    key: str = ""
    cached_tokens: int = 0  # of prompt_tokens, read from the provider's prompt cache
    cache_write_tokens: int = 0  # of prompt_tokens, written to it
    reasoning_tokens: int = 0  # of completion_tokens
    task_kind: str = ""
    created_at: datetime | None = None  # None: the database's now()


async def write_usage(conn: AsyncConnection[Any], row: UsageRow) -> bool:
    """Insert the usage row; False when a row with the same (task_id, key) already exists."""
    cursor = await conn.execute(
        "INSERT INTO usage_ledger (task_id, key, step, workspace, agent, channel, surface,"
        " task_kind, model, prompt_tokens, completion_tokens, cost_usd, cached_tokens,"
        " cache_write_tokens, reasoning_tokens, created_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, COALESCE(%s, now()))"
        " ON CONFLICT (task_id, key) DO NOTHING RETURNING id",
        (
            row.task_id,
            row.key or f"model:{row.step}",
            row.step,
            row.workspace,
            row.agent,
            row.channel,
            row.surface,
            row.task_kind,
            row.model,
            row.prompt_tokens,
            row.completion_tokens,
            row.cost_usd,
            row.cached_tokens,
            row.cache_write_tokens,
            row.reasoning_tokens,
            row.created_at,
        ),
    )
    return await cursor.fetchone() is not None


def arguments_digest(arguments: dict[str, object] | None) -> str | None:
    if arguments is None:
        return None
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def redact(value: Any, depth: int = 0) -> Any:
    """A preview of `value`: secret-looking keys masked, long strings and lists cut short."""
    if depth >= PREVIEW_DEPTH:
        return "…"
    if isinstance(value, dict):
        return {str(k): MASK if _secret_key(str(k)) else redact(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [redact(v, depth + 1) for v in value[:PREVIEW_LIST_ITEMS]]
        if len(value) > PREVIEW_LIST_ITEMS:
            items.append(f"…(+{len(value) - PREVIEW_LIST_ITEMS} more)")
        return items
    if isinstance(value, str):
        text = _TOKEN_VALUE.sub(MASK, value)
        if len(text) > PREVIEW_VALUE_CHARS:
            return f"{text[:PREVIEW_VALUE_CHARS]}…({len(value)} chars)"
        return text
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact(str(value), depth)


def mask_text(text: str) -> str:
    """`text` with token-shaped values (Slack, GitHub, provider keys, bearer headers) masked."""
    return _TOKEN_VALUE.sub(MASK, text)


def mask_secrets(value: Any) -> Any:
    """`value` whole, secret-looking keys and token-shaped strings masked: what `redact`
    masks, with nothing cut short (`openloop tasks export` must stay complete)."""
    if isinstance(value, dict):
        return {str(k): MASK if _secret_key(str(k)) else mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_secrets(v) for v in value]
    if isinstance(value, str):
        return mask_text(value)
    return value


def _secret_key(name: str) -> bool:
    lowered = name.lower()
    return any(hint in lowered for hint in SECRET_KEY_HINTS)


async def write_audit(conn: AsyncConnection[Any], event: AuditEvent) -> bool:
    """Insert the audit row; False when a row with the same (task_id, key) already exists."""
    preview = None if event.arguments is None else json.dumps(redact(event.arguments))
    cursor = await conn.execute(
        "INSERT INTO audit_log (task_id, key, step, workspace, agent, channel, kind, actor,"
        " approver, tool, arguments_sha256, arguments_preview, outcome)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s)"
        " ON CONFLICT (task_id, key) DO NOTHING RETURNING id",
        (
            event.task_id,
            event.key,
            event.step,
            event.workspace,
            event.agent,
            event.channel,
            event.kind,
            event.actor,
            event.approver,
            event.tool,
            arguments_digest(event.arguments),
            preview,
            event.outcome,
        ),
    )
    return await cursor.fetchone() is not None
