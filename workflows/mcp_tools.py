"""A task's MCP tools: listed once, at the task's start, from the agent's MCP servers (the
allowed ones join the task's specs), and each call an activity that checks the tool's schema
is still the one the model saw. The tool runner validates, permits and approves every call
first; the dispatch (`workflows.tool_dispatch`) hands the MCP ones here.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.activity_options import MCP_CALL_OPTIONS, MCP_LIST_OPTIONS
    from workflows.mcp_types import McpCallInput, McpListInput, McpListResult
    from workflows.tool_catalog import ToolSet, ToolSpec
    from workflows.types import ActivityName, TaskInput, TaskStatus, ToolCallInput, ToolCallResult

from workflows.task_record import TaskRecord, TaskStop


class McpTools:
    def __init__(self, inp: TaskInput, tools: ToolSet, record: TaskRecord) -> None:
        self.inp = inp
        self.agent = inp.agent
        self.tools = tools
        self.record = record

    async def list_tools(self) -> list[str]:
        """Add the allowed tools of the agent's MCP servers to this task's specs, once, at its
        start; returns what people should hear about servers that could not be listed."""
        servers = list(self.agent.spec.mcp_servers)
        if not servers:
            return []
        listed: McpListResult = await workflow.execute_activity(
            ActivityName.MCP_LIST_TOOLS,
            McpListInput(self.inp.task_id, servers),
            result_type=McpListResult,
            **MCP_LIST_OPTIONS,
        )
        self.tools.add(listed.specs)
        notices = []
        for status in listed.servers:
            if status.ok:
                self.record.record("tool", f"MCP server {status.name}: {status.tools} tool(s) allowed")
                continue
            server = self.agent.spec.mcp_server(status.name)
            if server is not None and server.required:
                raise TaskStop(
                    TaskStatus.ERROR,
                    f"the required MCP server {status.name} is unavailable: {status.problem}",
                )
            notice = (
                f"The MCP server {status.name} was unavailable when this task started "
                f"({status.problem}), so its tools were not used."
            )
            self.record.decide(notice)
            notices.append(notice)
        return notices

    async def call(self, spec: ToolSpec, tool_input: ToolCallInput) -> ToolCallResult:
        server = self.agent.spec.mcp_server(spec.mcp_server or "")
        if server is None:  # the spec came from a server the agent no longer names
            return ToolCallResult(
                ok=False, output=f"Error: {spec.name} is not available", error_kind="failed"
            )
        remote_name = spec.name.removeprefix(f"{server.name}.")
        call = McpCallInput(tool_input, server, remote_name, spec.sha256)
        result: ToolCallResult = await workflow.execute_activity(
            ActivityName.MCP_CALL_TOOL, call, result_type=ToolCallResult, **MCP_CALL_OPTIONS
        )
        return result
