"""How a tool the workflow runs itself is declared: once, like a native tool (an arguments
model, its metadata and its handler), in a family module of `workflows/tools/`:

    class CancelSubagentArgs(ToolArgs):
        child: NonEmpty = Field(description="The subagent's task id")

    @workflow_tool("agent.cancel_subagent", CancelSubagentArgs, "Stop a subagent you started.",
                   permission="agents:delegate", writes=False)
    async def cancel_subagent(args: CancelSubagentArgs, call: WorkflowCall) -> ToolCallResult:
        handle = call.task.delegation.running.get(args.child)
        if handle is None:
            return ToolCallResult(False, f"Error (not_found): no {args.child}", error_kind="not_found")
        handle.cancel()
        return ToolCallResult(True, f"Asked {args.child} to stop")

The declaration makes the tool's `ToolSpec` (`runs=ToolRuns.WORKFLOW`, the schema generated
from the arguments model as a native tool's is). The catalog (`activities/tools/catalog.py`)
reads it from here for config validation, the specs a task starts with and the model's tool
list; the dispatch (`workflows.tool_dispatch`) hands each call, already validated, permitted
and approved by the tool runner, to its handler. What else the workflow must know of a tool
is a flag of its declaration: it starts a child task, runs in parallel with others of its
kind, comes with a task's skills, or is offered only in some states of the task.

Workflow code: deterministic, no I/O. The handlers run inside the workflow sandbox: this
module and the families are not passed through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.tool_args import ToolArgs, arguments_schema
    from workflows.tool_catalog import ToolRuns, ToolSet, ToolSpec, WriteBound
    from workflows.types import TaskInput, ToolCallInput, ToolCallResult

if TYPE_CHECKING:
    from workflows.delegation import Delegation
    from workflows.task_record import TaskRecord
    from workflows.task_workspace import TaskWorkspace
    from workflows.usage_meter import UsageMeter

WORKFLOW_SOURCE = "workflow"  # ToolSpec.source of every tool declared here


@dataclass(frozen=True)
class TaskParts:
    """The parts of a task its workflow-run tools act through (composed by the workflow)."""

    inp: TaskInput
    tools: ToolSet  # the specs the task offers now
    record: TaskRecord
    meter: UsageMeter
    delegation: Delegation
    workspace: TaskWorkspace


@dataclass(frozen=True)
class WorkflowCall:
    """One call, validated, permitted and approved: what a handler gets besides its arguments."""

    input: ToolCallInput  # an approved pull request's holds the proposal the person saw
    key: str  # names the call: its position, tool and arguments
    share: int  # how many calls of one answer share what the budget has left
    task: TaskParts


Handler = Callable[[Any, WorkflowCall], Awaitable[ToolCallResult]]


@dataclass(frozen=True)
class WorkflowTool:
    spec: ToolSpec
    args: type[ToolArgs]
    handler: Handler
    starts_task: bool = False  # a child task: neither offered nor run past the tree's depth
    parallel: bool = False  # several calls in one answer run at once
    with_skills: bool = False  # offered to every task with skills, not granted in spec.tools
    offered: Callable[[TaskParts], bool] | None = None  # offered only while this holds

    async def run(self, call: WorkflowCall) -> ToolCallResult:
        # The runner checked the model's arguments against the spec's schema; what the
        # workflow added to an approved call (a pull request's diff) stays in `call.input`.
        sent = {key: value for key, value in call.input.arguments.items() if key in self.args.model_fields}
        try:
            args = self.args.model_validate(sent)
        except ValidationError as exc:
            problem = f"Error (invalid): invalid arguments for {self.spec.name}: {exc}"
            return ToolCallResult(ok=False, output=problem, error_kind="invalid")
        return await self.handler(args, call)


_DECLARED: dict[str, WorkflowTool] = {}


def workflow_tool(
    name: str,
    args: type[ToolArgs],
    description: str,
    *,
    permission: str,
    writes: bool,
    bound_argument: str | None = None,
    bound_by: WriteBound | None = None,
    always_gated: bool = False,
    starts_task: bool = False,
    parallel: bool = False,
    with_skills: bool = False,
    offered: Callable[[TaskParts], bool] | None = None,
) -> Callable[[Handler], WorkflowTool]:
    """Declare a tool the workflow runs itself on its handler."""
    if (bound_argument is None) != (bound_by is None):
        raise ValueError(f"{name}: bound_argument and bound_by go together")
    spec = ToolSpec(
        name=name,
        description=description,
        parameters=arguments_schema(args),
        permission=permission,
        writes=writes,
        runs=ToolRuns.WORKFLOW,
        bound_argument=bound_argument,
        bound_by=bound_by,
        source=WORKFLOW_SOURCE,
        always_gated=always_gated,
    )

    def register(handler: Handler) -> WorkflowTool:
        if name in _DECLARED:
            raise ValueError(f"the workflow tool {name!r} is declared twice")
        tool = WorkflowTool(spec, args, handler, starts_task, parallel, with_skills, offered)
        _DECLARED[name] = tool
        return tool

    return register


def declared() -> dict[str, WorkflowTool]:
    return dict(_DECLARED)
