"""Who runs a tool's call: the one place that reads `ToolSpec.runs`.

A call reaches here validated, permitted, bounded and approved (`workflows.tool_runner`).
A native tool runs in the tool activity: locally for our own database, as an activity for
outside services, or on the queue of the worker holding the task's workspace. An MCP tool
runs in the MCP gateway's activity (`workflows.mcp_tools`). A tool the workflow runs itself
goes to the handler declared with it (`workflows.tools`). The same field says which tools
the model is offered now and which calls may run inside the next model call.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.activity_options import LOCAL_TOOL_OPTIONS, TOOL_OPTIONS
    from workflows.tool_catalog import ToolRuns, ToolSpec
    from workflows.types import ActivityName, ToolCallInput, ToolCallResult

from workflows.mcp_tools import McpTools
from workflows.tools import WORKFLOW_TOOLS
from workflows.workflow_tool import TaskParts, WorkflowCall


class ToolDispatch:
    def __init__(self, task: TaskParts, mcp: McpTools) -> None:
        self.task = task
        self.mcp = mcp

    def offers(self, spec: ToolSpec) -> bool:
        """Whether the model is offered the tool now: the code tools only while a workspace
        is open; a workflow-run tool while its declaration says so."""
        if spec.runs == ToolRuns.WORKSPACE:
            return self.task.workspace.state is not None
        if spec.runs == ToolRuns.WORKFLOW:
            tool = WORKFLOW_TOOLS.get(spec.name)
            return tool is not None and (tool.offered is None or tool.offered(self.task))
        return True

    @staticmethod
    def folds(spec: ToolSpec) -> bool:
        """Whether the call may run inside the next model call, whose activity runs the
        native tools of our own database (the runner adds: read-only, no approval)."""
        return spec.runs == ToolRuns.LOCAL

    @staticmethod
    def in_parallel(name: str) -> bool:
        """Whether calls of this tool in one answer run at once (delegations)."""
        tool = WORKFLOW_TOOLS.get(name)
        return tool is not None and tool.parallel

    async def run(self, spec: ToolSpec | None, call: ToolCallInput, key: str, share: int) -> ToolCallResult:
        """Run one call, where its spec says."""
        if spec is None:  # gone from the task's specs since its check (a loaded skill narrowed them)
            return await self._tool_activity(ToolRuns.REMOTE, call)  # which says it is not there
        if spec.runs == ToolRuns.WORKFLOW:
            tool = WORKFLOW_TOOLS.get(spec.name)
            if tool is None:  # recorded by a release that declared it; this one does not
                return ToolCallResult(False, f"Error: {spec.name} is not available", error_kind="failed")
            return await tool.run(WorkflowCall(call, key, share, self.task))
        if spec.runs == ToolRuns.MCP:
            return await self.mcp.call(spec, call)
        if spec.runs == ToolRuns.WORKSPACE:
            return await self.task.workspace.run_tool(call)
        return await self._tool_activity(spec.runs, call)

    @staticmethod
    async def _tool_activity(runs: ToolRuns, call: ToolCallInput) -> ToolCallResult:
        """A native tool in the tool activity: local for our own database, else an activity."""
        result: ToolCallResult
        if runs == ToolRuns.LOCAL:
            result = await workflow.execute_local_activity(
                ActivityName.RUN_TOOL, call, result_type=ToolCallResult, **LOCAL_TOOL_OPTIONS
            )
        else:
            result = await workflow.execute_activity(
                ActivityName.RUN_TOOL, call, result_type=ToolCallResult, **TOOL_OPTIONS
            )
        return result
