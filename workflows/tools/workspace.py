"""The two coding tools the workflow runs itself, on the task's workspace part
(`workflows.task_workspace`): `code.open_workspace` (a sandboxed clone of a bound repository,
held by a loop worker, for the `code.*` tools) and `github.create_pull_request` (the
workspace's diff as a draft pull request, always after a person approved that exact diff:
the tool runner proposes it and waits, this runs the approved proposal).

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.code_types import CREATE_PULL_REQUEST
    from workflows.tool_catalog import WriteBound
    from workflows.types import ToolCallResult
    from workflows.workflow_tool_args import OpenWorkspaceArgs, PullRequestArgs

from workflows.workflow_tool import TaskParts, WorkflowCall, workflow_tool


def _none_open(task: TaskParts) -> bool:
    return task.workspace.state is None


@workflow_tool(
    "code.open_workspace",
    OpenWorkspaceArgs,
    "Clone one of your repositories into a sandboxed workspace so you can read, edit and "
    "test its code with the code.* tools. Runs the project's tests once to show where it stands.",
    permission="code:read",
    writes=False,
    bound_argument="repo",
    bound_by=WriteBound.GITHUB_REPOS,
    offered=_none_open,
)
async def open_workspace(args: OpenWorkspaceArgs, call: WorkflowCall) -> ToolCallResult:
    return await call.task.workspace.open(args.repo, args.base or "main")


def _own_open(task: TaskParts) -> bool:
    """A workspace this task opened (one lent by a repair loop is the loop's to propose)."""
    return task.workspace.state is not None and not task.workspace.state.lent


@workflow_tool(
    CREATE_PULL_REQUEST,
    PullRequestArgs,
    "Propose the workspace's changes as a draft pull request. A person approves the exact "
    "diff first (they see the diff, the tests before and after, and the cost); then a branch, "
    "a commit and the draft pull request are made. Run the tests before you propose.",
    permission="pulls:write",
    writes=True,
    always_gated=True,
    offered=_own_open,
)
async def create_pull_request(args: PullRequestArgs, call: WorkflowCall) -> ToolCallResult:
    return await call.task.workspace.open_pull_request(call.input, call.task.meter.usage.cost_usd)
