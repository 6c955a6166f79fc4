"""The stored side of one tool call: its audit row, and an output too large for history.

Every path that runs a tool (the tool activity, the coding activity on a workspace worker,
the tool calls a model call folds in, MCP calls, skill loads) ends in `bound_and_audit`:
the call's audit row is written (keyed by the call, so a retry adds nothing) and an output
longer than `TOOL_OUTPUT_PREVIEW_CHARS` is stored in Postgres and replaced by its preview
and a reference. `record_tool_span_attributes` puts the same facts on the call's span.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from opentelemetry import trace
from psycopg import AsyncConnection

from activities.store import ledger, transcript
from workflows.types import AuditEvent, ToolCallInput, ToolCallResult


def tool_audit(inp: ToolCallInput, result: ToolCallResult) -> AuditEvent:
    """The audit row of one tool call; keyed by the call, so writing it again adds nothing.
    A handler may write it itself, in the transaction of its own writes."""
    return AuditEvent(
        task_id=inp.task_id,
        step=inp.step,
        key=f"{inp.step}:{inp.call_id}:tool",
        agent=inp.memory.agent,
        workspace=inp.memory.workspace,
        channel=inp.context.channel,
        kind="tool_call",
        actor=inp.requested_by,
        tool=inp.tool,
        arguments=inp.arguments,
        outcome="ok" if result.ok else f"error:{result.error_kind}",
        approver=inp.approval.approver if inp.approval else None,
    )


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
        bounded = replace(result, output=transcript.tool_output_preview(result.output, ref), output_ref=ref)
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
