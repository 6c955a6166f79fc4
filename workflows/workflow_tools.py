"""Tools that are not native activities: MCP tools (listed at the task's start, each call an
activity that checks the schema), skills (read from the pinned version), delegation
(child workflows) and the workspace's (opening one, the draft pull request). The tool
runner validates, permits and approves every call first; this part only runs the ones it
hands over.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from workflows.activity_options import LOCAL_TOOL_OPTIONS, MCP_CALL_OPTIONS, MCP_LIST_OPTIONS
    from workflows.mcp_types import McpCallInput, McpListInput, McpListResult
    from workflows.skill_tools import SkillLoadInput
    from workflows.tool_catalog import ToolSet, ToolSpec
    from workflows.types import ActivityName, TaskInput, TaskStatus, ToolCallInput, ToolCallResult
    from workflows.workspace_tool_specs import PULL_REQUEST_SOURCE, WORKSPACE_SOURCE

from workflows.delegation import Delegation
from workflows.task_record import TaskRecord, TaskStop, failure_reason
from workflows.task_tree import depth_refusal
from workflows.task_workspace import TaskWorkspace

SKILL_NARROWS = "skill-allowed-tools"  # workflow.patched id: a loaded skill narrows the tools


class WorkflowTools:
    def __init__(
        self,
        inp: TaskInput,
        tools: ToolSet,
        record: TaskRecord,
        delegation: Delegation,
        workspace: TaskWorkspace,
    ) -> None:
        self.inp = inp
        self.workspace = workspace
        self.agent = inp.agent
        self.tools = tools
        self.record = record
        self.delegation = delegation

    async def run(self, spec: ToolSpec, tool_input: ToolCallInput, key: str, share: int) -> ToolCallResult:
        if spec.mcp_server is not None:
            return await self.call_mcp(spec, tool_input)
        if spec.source == "skill":
            return await self.read_skill(tool_input)
        if spec.source == WORKSPACE_SOURCE:
            return await self.workspace.open(tool_input)
        if spec.source == PULL_REQUEST_SOURCE:
            return await self.workspace.open_pull_request(tool_input, self.delegation.meter.usage.cost_usd)
        return await self.delegate(spec.source, key, dict(tool_input.arguments), share)

    async def list_mcp_tools(self) -> list[str]:
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

    async def delegate(self, kind: str, key: str, arguments: dict[str, object], share: int) -> ToolCallResult:
        if not self.delegation.allowed():
            tool = "agent.ask_teammate" if kind == "teammate" else "agent.delegate"
            refusal = f"Error (permission): {depth_refusal(self.inp, tool)}"
            return ToolCallResult(ok=False, output=refusal, error_kind="permission")
        try:
            if kind == "teammate":
                return await self.delegation.ask_teammate(key, arguments)
            return await self.delegation.run(key, arguments, share)
        except ChildWorkflowError as err:
            return ToolCallResult(
                ok=False, output=f"Error: the subagent failed: {failure_reason(err)}", error_kind="failed"
            )

    async def read_skill(self, tool_input: ToolCallInput) -> ToolCallResult:
        name = str(tool_input.arguments.get("name", ""))
        skill = next((ref for ref in self.inp.skills if ref.name == name), None)
        if skill is None:
            known = ", ".join(ref.name for ref in self.inp.skills)
            problem = f"Error (not_found): no skill {name!r}; skills: {known}"
            return ToolCallResult(ok=False, output=problem, error_kind="not_found")
        path = tool_input.arguments.get("path")
        read = SkillLoadInput(tool_input, skill, str(path) if path is not None else None)
        result: ToolCallResult = await workflow.execute_local_activity(
            ActivityName.SKILL_LOAD, read, result_type=ToolCallResult, **LOCAL_TOOL_OPTIONS
        )
        if result.ok and path is None and skill.allowed_tools and workflow.patched(SKILL_NARROWS):
            # For the rest of the task (and its later runs and subagents, which start with
            # these specs) the model is offered only the tools the skill allows that it had.
            removed = self.tools.narrow(skill.allowed_tools, keep_sources=("skill",))
            if removed:
                self.record.decide(
                    f"skill {name} allows only {', '.join(skill.allowed_tools)}: "
                    f"no longer offered {', '.join(removed)}"
                )
        return result

    async def call_mcp(self, spec: ToolSpec, tool_input: ToolCallInput) -> ToolCallResult:
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
