"""`agent.delegate` and `agent.ask_teammate`: the tools that start a child task, run by the
task's delegation part (`workflows.delegation`): a subagent of the same agent with a slice
of the budget, or a task of a teammate with its own config. Past the tree's depth limit
they are neither offered (`workflows.task_tree`) nor run; a child that fails is the call's
failure, told to the model.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from workflows.types import ToolCallResult
    from workflows.workflow_tool_args import AskTeammateArgs, DelegateArgs

from workflows.task_record import failure_reason
from workflows.workflow_tool import WorkflowCall, workflow_tool


@workflow_tool(
    "agent.delegate",
    DelegateArgs,
    "Hand a self-contained piece of work to a subagent with a fresh context. Say everything "
    "it needs in `task`; it answers once, with what it found. Several calls in one answer "
    "run in parallel.",
    permission="agents:delegate",
    writes=False,
    starts_task=True,
    parallel=True,
)
async def delegate(args: DelegateArgs, call: WorkflowCall) -> ToolCallResult:
    children = call.task.delegation
    return await _child(call, lambda: children.run(call.key, args.task, args.profile, args.tools, call.share))


@workflow_tool(
    "agent.ask_teammate",
    AskTeammateArgs,
    "Ask another agent of your team (named in your instructions) a question. It answers with "
    "its own tools, memory, budget and approvals; you get its answer.",
    permission="agents:ask",
    writes=False,
    starts_task=True,
)
async def ask_teammate(args: AskTeammateArgs, call: WorkflowCall) -> ToolCallResult:
    children = call.task.delegation
    return await _child(call, lambda: children.ask_teammate(call.key, args.teammate, args.question))


async def _child(call: WorkflowCall, start: Callable[[], Awaitable[ToolCallResult]]) -> ToolCallResult:
    """Start a child task and wait for it: refused below the tree's depth limit."""
    refusal = call.task.delegation.refusal(call.input.tool)
    if refusal is not None:
        return refusal
    try:
        return await start()
    except ChildWorkflowError as err:
        return ToolCallResult(
            ok=False, output=f"Error: the subagent failed: {failure_reason(err)}", error_kind="failed"
        )
