"""Delegation: `agent.delegate` hands a self-contained piece of work to a subagent.

A subagent is a child workflow of the same agent with a fresh context, a subset of the
parent's tools (never more; a named profile, `explore`, `plan`, `code` or the agent's own,
narrows them further and prefaces its instructions), and a budget carved out of the
parent's remaining one before it starts: delegations asked for in one answer run in
parallel (at most `spec.subagents.max_parallel` at a time) and share what is left, so the
sum over a task's tree never exceeds its ceiling. Depth: a subagent carries its parent's
`max_depth` less one, and one at zero is neither offered `agent.delegate` nor allowed it.
A teammate's task is bounded the same way (`workflows.task_tree`): its budget carved out of
the asker's, its depth counted in the same tree, and no agent asked by a task below it.
The child's answer, usage and stop reason come back as the tool result; its usage is
charged to the parent. Its id derives from the parent's id, the step and the call's key,
so a retried step never starts a second child. A question to a teammate is audited on both
sides: in the teammate's audit who asked it, in the caller's whom it asked and the outcome.

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
    from config.subagents import DEFAULT_MAX_PARALLEL, SubagentProfile, allows_tool
    from workflows import search
    from workflows.activity_options import LOCAL_OPTIONS
    from workflows.delegate_tool import CHILD_WAITING_SIGNAL, ChildWait, TeammateLookup, TeammateStart
    from workflows.tool_catalog import ToolSet
    from workflows.types import (
        ActivityName,
        AuditEvent,
        BudgetUsage,
        TaskInput,
        TaskResult,
        TaskStatus,
        ToolCallResult,
    )

from workflows.task_record import TaskRecord
from workflows.task_tree import (
    carved_agent,
    clamped,
    cycle_refusal,
    depth_left,
    depth_refusal,
    lineage,
    offered,
    teammate_input,
    with_mcp_narrowed,
)
from workflows.tools import with_skills
from workflows.usage_meter import UsageMeter

MAX_PARALLEL = DEFAULT_MAX_PARALLEL  # unless the agent's spec.subagents.max_parallel says otherwise


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

    def refusal(self, tool: str) -> ToolCallResult | None:
        """Why `tool` may not start a child here, if it may not: past the depth limit (a child
        carries what is left of it) or the tree's."""
        if depth_left(self.inp):
            return None
        return ToolCallResult(
            ok=False, output=f"Error (permission): {depth_refusal(self.inp, tool)}", error_kind="permission"
        )

    async def run(
        self, key: str, task: str, named: str | None, tools: list[str] | None, share: int
    ) -> ToolCallResult:
        """Start one subagent with `1/share` of what the parent has left, and wait for it:
        `task` is its request, `named` its profile, `tools` the parent's tools it may use."""
        profile = None
        if named is not None:
            profile = self.inp.agent.spec.subagents.profile(named)
            if profile is None:
                known = ", ".join(self.inp.agent.spec.subagents.profile_names)
                problem = f"Error (invalid): there is no subagent profile {named!r}; profiles: {known}"
                return ToolCallResult(ok=False, output=problem, error_kind="invalid")
        usd, tokens = self._carve(share)
        child = self._child_input(key, task, tools, usd, tokens, profile)
        preset = f" (profile {named})" if named is not None else ""
        self.record.record(
            "tool", f"agent.delegate: started {child.task_id}{preset} with ${usd:.4f}, {tokens} tokens"
        )
        summary = f"subagent of {self.inp.task_id}: {task[:120]}"
        result = await self._child(child, "subagent", summary)
        self._charge(result.usage)
        text = result.reply.strip() or "(no answer)"
        outcome = f"Subagent {result.status.value} after {result.steps} step(s), ${result.usage.cost_usd:.4f}"
        return ToolCallResult(ok=result.status.value == "SUCCESS", output=f"{outcome}:\n{text}")

    async def ask_teammate(self, key: str, name: str, question: str) -> ToolCallResult:
        """A task of another agent of the team: its own config, tools, memory, budget and
        approvals; the caller hears only its answer."""
        arguments: dict[str, object] = {"teammate": name, "question": question}  # as audited
        if name not in self.inp.agent.spec.team:
            team = ", ".join(self.inp.agent.spec.team) or "none"
            return ToolCallResult(
                ok=False,
                output=f"Error (permission): {name!r} is not on your team ({team})",
                error_kind="permission",
            )
        refusal = cycle_refusal(self.inp, name)
        if refusal is not None:
            self.record.record("refused", f"agent.ask_teammate: {refusal}")
            return ToolCallResult(ok=False, output=f"Error (permission): {refusal}", error_kind="permission")
        found: TeammateStart = await workflow.execute_local_activity(
            ActivityName.TEAMMATE_START,
            TeammateLookup(name, self.inp.agent.workspace),
            result_type=TeammateStart,
            **LOCAL_OPTIONS,
        )
        task_id = f"{self.inp.task_id}-t{self.record.step}-{key}"
        request = f"{self.inp.agent.name} asks: {question}"
        # Out of what this task has left, in this task's tree.
        child = teammate_input(self.inp, found, task_id, request, self._carve(1))
        ceiling = child.agent.spec
        self.record.record(
            "tool",
            f"agent.ask_teammate: asked {name} ({task_id}) with ${ceiling.budget.per_task_usd:.4f}, "
            f"{ceiling.limits.token_limit} tokens",
        )
        summary = f"{name} asked by {self.inp.agent.name} ({self.inp.task_id})"
        # In the teammate's audit: who asked it, before it answers.
        await self._audit(child, "teammate_asked", f"agent:{self.inp.agent.name}", arguments, "asked")
        result = await self._child(child, f"teammate {name}", summary)
        self._charge(result.usage)
        # In the caller's: whom it asked, and how that ended.
        await self._audit(
            self.inp,
            "teammate_answered",
            self.inp.context.user,
            arguments,
            key=key,
            outcome=f"{result.status.value.lower()}: {child.task_id}",
        )
        outcome = f"{name} ({result.status.value}, ${result.usage.cost_usd:.4f} of your budget)"
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
            # Found by the same filters as the task that asked (agent, channel, surface).
            search_attributes=search.task_attributes(
                child.agent.name,
                child.agent.workspace,
                child.context.channel,
                child.context.surface,
                TaskStatus.RUNNING.value,
            ),
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
        if self.inp.parent is None:
            return
        approvers = list(self.inp.agent.spec.approvals.approvers) if tool else []
        parent = workflow.get_external_workflow_handle(self.inp.parent)
        try:
            await parent.signal(CHILD_WAITING_SIGNAL, ChildWait(self.inp.task_id, tool, approvers))
        except FailureError as err:  # the parent ended meanwhile; the wait goes on regardless
            self.record.decide(f"could not tell the parent {self.inp.parent} about the wait: {err}")

    async def _audit(
        self,
        task: TaskInput,
        kind: str,
        actor: str,
        arguments: dict[str, object],
        outcome: str,
        key: str = "",
    ) -> None:
        """One row of an agent's audit about a question between teammates."""
        step = self.record.step if task is self.inp else 0
        await workflow.execute_local_activity(
            ActivityName.RECORD_AUDIT,
            AuditEvent(
                task_id=task.task_id,
                step=step,
                key=f"{step}:{key}:{kind}" if key else f"{step}:{kind}",
                agent=task.agent.name,
                workspace=task.agent.workspace,
                channel=task.context.channel,
                kind=kind,
                actor=actor,
                tool="agent.ask_teammate",
                arguments=dict(arguments),
                outcome=outcome,
            ),
            **LOCAL_OPTIONS,
        )

    def _carve(self, share: int) -> tuple[float, int]:
        ceilings, usage = self.meter.ceilings, self.meter.usage
        usd = max(0.0, ceilings.usd_limit - usage.cost_usd) / max(1, share)
        tokens = max(0, ceilings.token_limit - usage.tokens) // max(1, share)
        return usd, tokens

    def _charge(self, spent: BudgetUsage) -> None:
        self.meter.usage.prompt_tokens += spent.prompt_tokens
        self.meter.usage.completion_tokens += spent.completion_tokens
        self.meter.usage.cost_usd += spent.cost_usd

    def _child_input(
        self,
        key: str,
        task: str,
        asked: list[str] | None,
        usd: float,
        tokens: int,
        profile: SubagentProfile | None = None,
    ) -> TaskInput:
        """What the subagent starts with: the parent's tools narrowed by the profile and the
        call's `tools` (never widened), `agent.delegate` only while depth is left."""
        given = self.tools.specs if self.tools is not None else (self.inp.tools or [])
        depth = clamped(self.inp.agent.spec.subagents.child(), len(self.inp.ancestors) + 1)
        parent_tools = offered(given, depth)
        if profile is not None:  # skill tools stay: the child keeps the parent's skills
            parent_tools = [
                s for s in parent_tools if with_skills(s.name) or allows_tool(profile, s.name, s.reads_only)
            ]
        if asked is not None:
            parent_tools = [spec for spec in parent_tools if spec.name in asked]
        agent = carved_agent(self.inp.agent, usd, max(tokens, 1))
        if profile is not None or asked is not None:
            agent = with_mcp_narrowed(agent, parent_tools)
        spec = agent.spec.model_copy(update={"subagents": depth})
        if profile is not None and profile.instructions:
            spec = spec.model_copy(update={"instructions": f"{profile.instructions}\n\n{spec.instructions}"})
        agent = agent.model_copy(update={"spec": spec})
        return TaskInput(
            task_id=f"{self.inp.task_id}-d{self.record.step}-{key}",
            agent=agent,
            agent_version=self.inp.agent_version,
            context=self.inp.context,
            request=task,
            task_kind=self.inp.task_kind,
            tools=parent_tools,
            skills=list(self.inp.skills),
            parent=self.inp.task_id,
            ancestors=lineage(self.inp),
        )
