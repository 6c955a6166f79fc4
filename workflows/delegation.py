"""Delegation: `agent.delegate` hands a self-contained piece of work to a subagent.

A subagent is a child workflow of the same agent with a fresh context, a subset of the
parent's tools (never more, and never `agent.delegate` itself: depth is one), and a budget
carved out of the parent's remaining one before it starts: delegations asked for in one
answer run in parallel (at most `MAX_PARALLEL` at a time) and share what is left, so the
sum over a task's tree never exceeds its ceiling. The child's answer, usage and stop reason
come back as the tool result; its usage is charged to the parent. Its id derives from the
parent's id, the step and the call's key, so a retried step never starts a second child.

The parent cancels its running children when it is cancelled (its `cancel` signal; a
cancel from Temporal reaches them through the awaited child handles). A child waiting for
an approval signals its parent on entering and leaving the wait, so the parent's own
`status` query names what the tree waits on. Signals rather than a surface asking each
child: every surface that reads the parent's status (CLI, Slack, the dashboard) shows it
unchanged, the answer stays correct when no surface is looking, and it costs two events
only for the children that actually wait.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import FailureError
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from config.agent import AgentConfig
    from workflows.activity_options import LOCAL_OPTIONS
    from workflows.delegate_tool import CHILD_WAITING_SIGNAL, ChildWait, TeammateLookup, TeammateStart
    from workflows.tool_catalog import ToolSet
    from workflows.types import ActivityName, BudgetUsage, TaskInput, TaskResult, ToolCallResult

from workflows.task_record import TaskRecord
from workflows.usage_meter import UsageMeter

MAX_PARALLEL = 4
CHILD_WAITS = "child-approval-waits"  # workflow.patched id: a child tells its parent it waits


class Delegation:
    def __init__(
        self, inp: TaskInput, record: TaskRecord, meter: UsageMeter, tools: ToolSet | None = None
    ) -> None:
        self.inp = inp
        self.tools = tools  # what the task offers now (a loaded skill may have narrowed it)
        self.record = record
        self.meter = meter
        self.labels: dict[str, str] = {}  # child id -> "subagent" or "teammate <name>"
        self.running: dict[str, ChildWorkflowHandle[object, TaskResult]] = {}
        self.waits: dict[str, ChildWait] = {}  # the children waiting for an approval now
        self.cancelled = False

    def allowed(self) -> bool:
        return self.inp.parent is None  # a subagent does not delegate again

    async def run(self, key: str, arguments: dict[str, object], share: int) -> ToolCallResult:
        """Start one subagent with `1/share` of what the parent has left, and wait for it."""
        usd, tokens = self._carve(share)
        child = self._child_input(key, arguments, usd, tokens)
        self.record.record(
            "tool", f"agent.delegate: started {child.task_id} with ${usd:.4f}, {tokens} tokens"
        )
        summary = f"subagent of {self.inp.task_id}: {str(arguments.get('task', ''))[:120]}"
        result = await self._child(child, "subagent", summary)
        self._charge(result.usage)
        text = result.reply.strip() or "(no answer)"
        outcome = f"Subagent {result.status.value} after {result.steps} step(s), ${result.usage.cost_usd:.4f}"
        return ToolCallResult(ok=result.status.value == "SUCCESS", output=f"{outcome}:\n{text}")

    async def ask_teammate(self, key: str, arguments: dict[str, object]) -> ToolCallResult:
        """A task of another agent of the team: its own config, tools, memory, budget and
        approvals; the caller hears only its answer."""
        name = str(arguments.get("teammate", ""))
        if name not in self.inp.agent.spec.team:
            team = ", ".join(self.inp.agent.spec.team) or "none"
            return ToolCallResult(
                ok=False,
                output=f"Error (permission): {name!r} is not on your team ({team})",
                error_kind="permission",
            )
        found: TeammateStart = await workflow.execute_local_activity(
            ActivityName.TEAMMATE_START,
            TeammateLookup(name, self.inp.agent.workspace),
            result_type=TeammateStart,
            **LOCAL_OPTIONS,
        )
        child = TaskInput(
            task_id=f"{self.inp.task_id}-t{self.record.step}-{key}",
            agent=found.agent,
            agent_version=found.version,
            context=self.inp.context,
            request=f"{self.inp.agent.name} asks: {arguments.get('question', '')}",
            tools=found.tools,
            skills=found.skills,
            parent=self.inp.task_id,
        )
        self.record.record("tool", f"agent.ask_teammate: asked {name} ({child.task_id})")
        summary = f"{name} asked by {self.inp.agent.name} ({self.inp.task_id})"
        result = await self._child(child, f"teammate {name}", summary)
        outcome = f"{name} ({result.status.value}, ${result.usage.cost_usd:.4f} of its own budget)"
        return ToolCallResult(
            ok=result.status.value == "SUCCESS", output=f"{outcome}:\n{result.reply.strip() or '(no answer)'}"
        )

    async def _child(self, child: TaskInput, label: str, summary: str) -> TaskResult:
        """Run one child task to its end; cancelled with its parent."""
        self.labels[child.task_id] = label
        handle: ChildWorkflowHandle[object, TaskResult] = await workflow.start_child_workflow(
            workflow.info().workflow_type,
            child,
            id=child.task_id,
            result_type=TaskResult,
            parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
            static_summary=summary,
        )
        self.running[child.task_id] = handle
        if self.cancelled:  # the parent was cancelled while this child was starting
            handle.cancel()
        try:
            return await handle
        finally:
            self.running.pop(child.task_id, None)
            self.waits.pop(child.task_id, None)

    def cancel_children(self) -> None:
        """The parent is cancelled: so is every child still running (Temporal cancels them,
        they end CANCELLED); the parent then stops at its next check."""
        self.cancelled = True
        for handle in self.running.values():
            handle.cancel()

    # Approval waits in the tree ------------------------------------------------------------

    def child_waiting(self, wait: ChildWait) -> None:
        """A child entered (`tool` set) or left an approval wait."""
        if wait.tool and wait.child_id in self.running:
            self.waits[wait.child_id] = wait
        else:
            self.waits.pop(wait.child_id, None)

    def waiting_line(self) -> str | None:
        """What the parent waits on while its children wait for people, for its status."""
        if not self.waits:
            return None
        parts = [
            f"{self.labels.get(wait.child_id, 'child')} {wait.child_id} waits for approval of "
            f"{wait.tool} by {', '.join(wait.approvers) or 'an approver'}"
            for wait in self.waits.values()
        ]
        return "waiting: " + "; ".join(parts)

    async def tell_parent(self, tool: str) -> None:
        """In a child: tell the parent this task now waits for an approval of `tool` (or, with
        an empty `tool`, no longer does). A parent already gone is not an error."""
        if self.inp.parent is None or not workflow.patched(CHILD_WAITS):
            return
        approvers = list(self.inp.agent.spec.approvals.approvers) if tool else []
        parent = workflow.get_external_workflow_handle(self.inp.parent)
        try:
            await parent.signal(CHILD_WAITING_SIGNAL, ChildWait(self.inp.task_id, tool, approvers))
        except FailureError as err:  # the parent ended meanwhile; the wait goes on regardless
            self.record.decide(f"could not tell the parent {self.inp.parent} about the wait: {err}")

    def _carve(self, share: int) -> tuple[float, int]:
        ceilings, usage = self.meter.ceilings, self.meter.usage
        usd = max(0.0, ceilings.usd_limit - usage.cost_usd) / max(1, share)
        tokens = max(0, ceilings.token_limit - usage.tokens) // max(1, share)
        return usd, tokens

    def _charge(self, spent: BudgetUsage) -> None:
        self.meter.usage.prompt_tokens += spent.prompt_tokens
        self.meter.usage.completion_tokens += spent.completion_tokens
        self.meter.usage.cost_usd += spent.cost_usd

    def _child_input(self, key: str, arguments: dict[str, object], usd: float, tokens: int) -> TaskInput:
        asked = arguments.get("tools")
        offered = self.tools.specs if self.tools is not None else (self.inp.tools or [])
        parent_tools = [spec for spec in offered if spec.source != "delegate"]
        if isinstance(asked, list):
            parent_tools = [spec for spec in parent_tools if spec.name in asked]
        agent = carved_agent(self.inp.agent, usd, max(tokens, 1))
        return TaskInput(
            task_id=f"{self.inp.task_id}-d{self.record.step}-{key}",
            agent=agent,
            agent_version=self.inp.agent_version,
            context=self.inp.context,
            request=str(arguments.get("task", "")),
            task_kind=self.inp.task_kind,
            tools=parent_tools,
            skills=list(self.inp.skills),
            parent=self.inp.task_id,
        )


def carved_agent(agent: AgentConfig, usd: float, tokens: int) -> AgentConfig:
    """The agent with this subagent's slice of the budget as its per-task ceiling."""
    spec = agent.spec
    budget = spec.budget.model_copy(update={"per_task_usd": usd})
    limits = spec.limits.model_copy(update={"token_limit": tokens})
    return agent.model_copy(update={"spec": spec.model_copy(update={"budget": budget, "limits": limits})})
