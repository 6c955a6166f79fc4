"""An agent as a repair loop's fixer (`fix: {agent: NAME}`): each fix round is a child agent
task, lent the loop's workspace, whose request carries the mission, the failing tests and the
last error, and which fixes with the coding tools. Its tokens and cost count against the
loop's budget (`limits.budget`); each child gets what is left.

A part of `workflows.repair_loop`, composed, not inherited. Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from workflows import search
    from workflows.activity_options import LOCAL_OPTIONS
    from workflows.code_types import CodeSetup, WorkspaceState
    from workflows.delegate_tool import TeammateLookup, TeammateStart
    from workflows.loop_types import CommandResult, LoopInput, Outcome, Step, WorkspaceHandle
    from workflows.task_basics import WORKFLOW_NAME, ActivityName, BudgetUsage, SurfaceContext, TaskStatus
    from workflows.types import TaskInput, TaskResult

from workflows.delegation import carved_agent
from workflows.loop_workspace import why

_TAIL_CHARS = 4000


def fix_request(inp: LoopInput, round_: int, failing: list[str], last_error: str) -> str:
    mission = inp.spec.mission
    lines = [
        f"Repair loop {inp.spec.name}, round {round_}: fix the project in your workspace.",
        f"Objective: {mission.objective}",
    ]
    lines += [f"Not in scope: {goal}" for goal in mission.non_goals]
    lines += [f"Done when: {mission.definition_of_done}"] if mission.definition_of_done else []
    lines += ["Failing tests: " + ", ".join(failing[:20])] if failing else []
    lines += ["The last error:", "```", last_error[-3000:], "```"] if last_error else []
    lines += [
        "Use code.run_tests to reproduce, code.search / code.read_file to find the cause, "
        "code.edit_file to fix it, and code.run_tests again. Change only what the fix needs; "
        "the loop verifies after you. End with one short paragraph on what you changed.",
    ]
    return "\n".join(lines)


class AgentFixer:
    def __init__(self, inp: LoopInput) -> None:
        self.inp = inp
        self.spent = BudgetUsage()
        self.runs = 0

    @property
    def left_usd(self) -> float | None:
        budget = self.inp.spec.limits.budget_usd
        return None if budget is None else max(0.0, budget - self.spent.cost_usd)

    @property
    def exhausted(self) -> bool:
        left = self.left_usd
        return left is not None and left <= 0.0

    async def fix(
        self, workspace: WorkspaceHandle, round_: int, failing: list[str], last_error: str
    ) -> CommandResult:
        """One fix round by the agent; how it went, as the loop's reports show a command."""
        name = self.inp.spec.fixer_agent
        assert name is not None
        started = workflow.now()
        found: TeammateStart = await workflow.execute_local_activity(
            ActivityName.TEAMMATE_START,
            TeammateLookup(name, "default"),
            result_type=TeammateStart,
            **LOCAL_OPTIONS,
        )
        agent = found.agent
        left = self.left_usd
        if left is not None:
            agent = carved_agent(agent, left, agent.spec.limits.token_limit)
        self.runs += 1
        spec = self.inp.spec
        setup = CodeSetup(
            repo=spec.repo, verify=spec.commands[Step.VERIFY], limits=spec.limits, sandbox=spec.sandbox
        )
        child = TaskInput(
            task_id=f"{self.inp.loop_id}-fix{round_}-{self.runs}",
            agent=agent,
            agent_version=found.version,
            context=self.inp.reply_to or SurfaceContext("cli", "loops", self.inp.started_by),
            request=fix_request(self.inp, round_, failing, last_error),
            task_kind="code",
            tools=[tool for tool in found.tools if tool.name != "github.create_pull_request"],
            skills=found.skills,
            parent=self.inp.loop_id,
            workspace=WorkspaceState(handle=workspace, setup=setup, lent=True),
            loop_queue=self.inp.loop_queue,
        )
        try:
            result: TaskResult = await workflow.execute_child_workflow(
                WORKFLOW_NAME,
                child,
                id=child.task_id,
                result_type=TaskResult,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                static_summary=f"{name} fixes round {round_} of {spec.name}",
                search_attributes=search.task_attributes(
                    agent.name,
                    agent.workspace,
                    child.context.channel,
                    child.context.surface,
                    TaskStatus.RUNNING.value,
                ),
            )
            reply, status, reason, usage = result.reply, result.status, result.reason, result.usage
        except ChildWorkflowError as err:
            reply, status, reason, usage = "", TaskStatus.ERROR, why(err), BudgetUsage()
        self.spent.prompt_tokens += usage.prompt_tokens
        self.spent.completion_tokens += usage.completion_tokens
        self.spent.cost_usd += usage.cost_usd
        ok = status == TaskStatus.SUCCESS
        return CommandResult(
            step=Step.FIX,
            round=round_,
            command=f"agent {name} (task {child.task_id})",
            outcome=Outcome.PASSED if ok else Outcome.FAILED,
            exit_code=0 if ok else 1,
            duration_s=round((workflow.now() - started).total_seconds(), 3),
            output_bytes=len(reply.encode()),
            output_id=None,
            tail=f"{reply.strip()}\n\n{status.value}: {reason}; ${usage.cost_usd:.4f}, {usage.tokens} tokens"[
                -_TAIL_CHARS:
            ],
            reason="" if ok else f"{status.value}: {reason}",
            error_summary="" if ok else reason,
        )
