"""The `memory.save` and `memory.search` tools: the agent's own scope only (channel, agent or
workspace, as its spec says), never another one's.

`memory.save` writes with the call's idempotency key, so a retried tool activity stores one
row, and writes it in one transaction with its audit row and, for a paid embedding (a LiteLLM
model), its usage row.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from pydantic import Field

from activities.runtime import Runtime
from activities.store import ledger
from activities.store.embeddings import Embeddings, is_offline
from activities.store.memory import MAX_CONTENT_CHARS, remember_with_usage, saved_text, search_with_usage
from activities.store.tool_calls import tool_audit
from activities.tool_errors import ToolError, ToolErrorKind
from activities.tools.native import NonEmpty, ToolArgs, native_tool
from workflows.tool_catalog import ToolRuns
from workflows.types import ToolCallInput, ToolCallResult

DEFAULT_K = 5
MAX_K = 20
SNIPPET_CHARS = 300


class SaveArgs(ToolArgs):
    content: NonEmpty


class SearchArgs(ToolArgs):
    query: NonEmpty
    k: int = Field(default=DEFAULT_K, ge=1, le=MAX_K)


@native_tool(
    "memory.save",
    SaveArgs,
    "Save a decision or fact to memory so later tasks can recall it.",
    permission="memory:write",
    writes=True,
    runs=ToolRuns.LOCAL,
)
async def save(args: SaveArgs, inp: ToolCallInput, rt: Runtime) -> str:
    content = args.content.strip()
    if not content:
        raise ToolError(ToolErrorKind.INVALID, "memory.save needs non-empty `content`")
    if len(content) > MAX_CONTENT_CHARS:
        raise ToolError(
            ToolErrorKind.INVALID, f"`content` is {len(content)} characters; save at most {MAX_CONTENT_CHARS}"
        )
    saved = ToolCallResult(ok=True, output=await saved_text(rt, inp.memory, content, inp.idempotency_key))
    pool = await rt.pool()
    # One transaction: the memory, its embedding's usage row and the call's audit row commit
    # together, so a crash between them leaves none and the retry writes all three once.
    async with pool.connection() as conn, conn.transaction():
        try:
            _, _, emb = await remember_with_usage(
                conn, inp.memory, content, inp.task_id, inp.step, inp.idempotency_key
            )
        except ValueError as exc:  # the scope itself is invalid
            raise ToolError(ToolErrorKind.INVALID, str(exc)) from None
        await _ledger_embedding(conn, inp, emb, "save")
        await ledger.write_audit(conn, tool_audit(inp, saved))
    return saved.output


@native_tool(
    "memory.search",
    SearchArgs,
    "Search this agent's memory (scoped to the channel or agent) for earlier decisions.",
    permission="memory:read",
    writes=False,
    runs=ToolRuns.LOCAL,
)
async def search(args: SearchArgs, inp: ToolCallInput, rt: Runtime) -> str:
    query = args.query.strip()
    if not query:
        raise ToolError(ToolErrorKind.INVALID, "memory.search needs a non-empty `query`")
    k = args.k
    pool = await rt.pool()
    try:
        items, emb = await search_with_usage(pool, inp.memory, query, k)
    except ValueError as exc:
        raise ToolError(ToolErrorKind.INVALID, str(exc)) from None
    if emb is not None and not is_offline(emb.model):
        async with pool.connection() as conn:
            await _ledger_embedding(conn, inp, emb, "search")
    if not items:
        return f"No memories in this {inp.memory.scope} yet."
    lines = [f"{len(items)} memories from this {inp.memory.scope}, best match first:"]
    for n, item in enumerate(items, 1):
        text = " ".join(item.content.split())
        if len(text) > SNIPPET_CHARS:
            text = text[:SNIPPET_CHARS] + "…"
        lines.append(f"{n}. ({item.created_at_iso[:10]}) {text}")
    return "\n".join(lines)


async def _ledger_embedding(
    conn: AsyncConnection[Any], inp: ToolCallInput, emb: Embeddings | None, what: str
) -> None:
    if emb is None or is_offline(emb.model):
        return
    await ledger.write_usage(
        conn,
        ledger.UsageRow(
            task_id=inp.task_id,
            step=inp.step,
            agent=inp.memory.agent,
            workspace=inp.memory.workspace,
            channel=inp.context.channel,
            surface=inp.context.surface,
            model=emb.model,
            prompt_tokens=emb.prompt_tokens,
            completion_tokens=0,
            cost_usd=emb.cost_usd,
            key=f"embed:{what}:{inp.idempotency_key}",
            task_kind="embedding",
        ),
    )
