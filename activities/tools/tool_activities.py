"""The tool activity: run one tool call through the registry, audit it, bound its output.

Outputs larger than a preview are stored in Postgres and referenced, never put whole in
workflow history. Side-effecting handlers honour `inp.idempotency_key`.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from opentelemetry import trace
from psycopg import AsyncConnection
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.runtime import Runtime, runtime
from activities.store import ledger, transcript
from activities.tools.catalog import native
from activities.tools.native import ToolError, tool_audit
from workflows.errors import ErrorType
from workflows.types import ActivityName, ToolCallInput, ToolCallResult


@activity.defn(name=ActivityName.RUN_TOOL)
async def run_tool(inp: ToolCallInput) -> ToolCallResult:
    rt = runtime()
    result = await execute_tool(inp, rt)
    pool = await rt.pool()
    async with pool.connection() as conn:
        return await bound_and_audit(conn, inp, result)


async def execute_tool(inp: ToolCallInput, rt: Runtime) -> ToolCallResult:
    """Run the call's handler; its whole output, or the error the model should see."""
    tool = native(inp.tool)
    if tool is None:
        raise ApplicationError(
            f"no handler is registered for tool {inp.tool!r}",
            type=ErrorType.TOOL_CONFIG_ERROR,
            non_retryable=True,
        )
    try:
        return ToolCallResult(ok=True, output=await tool.run(inp, rt))
    except ToolError as err:
        return ToolCallResult(ok=False, output=f"Error ({err.kind}): {err}", error_kind=err.kind)


async def bound_and_audit(
    conn: AsyncConnection[Any], inp: ToolCallInput, result: ToolCallResult
) -> ToolCallResult:
    """Write the call's audit row; an output too large for history is stored and previewed."""
    bounded = result
    if len(result.output) > transcript.TOOL_OUTPUT_PREVIEW_CHARS:
        # Named by content: the same output twice is the same reference, so a repeated
        # call with a repeated result still reads as no progress.
        digest = hashlib.sha256(f"{inp.task_id}\n{result.output}".encode()).hexdigest()
        ref = f"out-{digest[:24]}"
        await transcript.store_tool_output(conn, ref, inp.task_id, result.output)
        bounded = replace(
            result,
            output=result.output[: transcript.TOOL_OUTPUT_PREVIEW_CHARS]
            + f"\n[… {len(result.output)} characters in all, stored as {ref}]",
            output_ref=ref,
        )
    await ledger.write_audit(conn, tool_audit(inp, bounded))
    return bounded


def record_tool_span_attributes(span: trace.Span, inp: ToolCallInput, result: ToolCallResult) -> None:
    if not span.is_recording():
        return
    span.set_attributes(
        {
            "openloop.task_id": inp.task_id,
            "openloop.step": inp.step,
            "openloop.tool": inp.tool,
            "openloop.tool.ok": result.ok,
            "openloop.tool.error_kind": result.error_kind or "",
            "openloop.tool.approved_by": inp.approval.approver if inp.approval else "",
        }
    )
