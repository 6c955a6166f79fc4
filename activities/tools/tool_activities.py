"""The tool activity: run one tool call through the registry, audit it, bound its output.

Outputs larger than a preview are stored in Postgres and referenced, never put whole in
workflow history (`activities.store.tool_calls`). Side-effecting handlers honour
`inp.idempotency_key`.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeats import beating
from activities.runtime import Runtime, runtime
from activities.store.tool_calls import bound_and_audit
from activities.surface_activities import EVAL_SURFACE
from activities.tool_errors import ToolError
from activities.tools.catalog import native
from activities.tools.eval_tools import eval_tool_result
from workflows.errors import ErrorType
from workflows.types import ActivityName, ToolCallInput, ToolCallResult


@activity.defn(name=ActivityName.RUN_TOOL)
async def run_tool(inp: ToolCallInput) -> ToolCallResult:
    rt = runtime()
    async with beating(inp.tool):
        result = await execute_tool(inp, rt)
    if inp.context.surface == "linear":  # Linear shows each tool call in the session
        from activities.linear.surface import report_tool_call

        await report_tool_call(inp, result, rt)
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
    if inp.context.surface == EVAL_SURFACE:  # nothing outside OpenLoop is reached
        answered = await eval_tool_result(inp, tool.spec.writes, rt)
        if answered is not None:
            return answered
    try:
        return ToolCallResult(ok=True, output=await tool.run(inp, rt))
    except ToolError as err:
        return ToolCallResult(ok=False, output=f"Error ({err.kind}): {err}", error_kind=err.kind.value)
