"""AgentTaskWorkflow: one agent task, from request to reply, durable across crashes and waits.

The loop: check ceilings -> model activity -> for each tool call: validate, check
permissions, ask for approval if the config says so (a signal, waited on for days if need
be), run the tool activity -> repeat until the model answers without tools -> reply.
A step whose calls are all read-only local tools needing no approval runs them inside the
next model call instead: one round trip per step.

Deterministic: no I/O, no clocks but workflow.now(). The transcript lives in Postgres and
only references and small results ride in history, so history grows linearly with steps.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

# Workflow logic: imported inside the sandbox, so it is checked like this module.

with workflow.unsafe.imports_passed_through():
    from workflows import budget, policy, search
    from workflows.activity_options import (
        LOCAL_OPTIONS,
    )
    from workflows.outcomes import next_action, status_line
    from workflows.types import (
        WORKFLOW_NAME,
        ActivityName,
        ApprovalDecision,
        BudgetExtension,
        CancelRequest,
        CarriedState,
        ChatMessage,
        Explanation,
        PostReplyInput,
        RecallInput,
        RecallResult,
        TaskInput,
        TaskResult,
        TaskStatus,
        TaskStatusView,
        UserMessage,
    )

from workflows.task_state import TaskStop
from workflows.task_steps import TaskSteps

MAX_CONTINUATIONS = 3  # a reply cut off by the output limit is continued this many times


@workflow.defn(name=WORKFLOW_NAME)
class AgentTaskWorkflow(TaskSteps):
    @workflow.init
    def __init__(self, inp: TaskInput) -> None:
        super().__init__(inp)

    # Signals and queries -----------------------------------------------------------------

    @workflow.signal
    async def approve(self, decision: ApprovalDecision) -> None:
        await self.gate.receive(decision, approved=True, now=workflow.now())

    @workflow.signal
    async def deny(self, decision: ApprovalDecision) -> None:
        await self.gate.receive(decision, approved=False, now=workflow.now())

    @workflow.signal
    def user_message(self, message: UserMessage) -> None:
        self.pending.append(ChatMessage(role="user", content=f"{message.user}: {message.text}"))
        self._record("message", f"{message.user} added: {message.text[:120]}", actor=message.user)

    @workflow.signal
    def cancel(self, request: CancelRequest) -> None:
        self.cancel_request = request

    @workflow.signal
    def extend_budget(self, extension: BudgetExtension) -> None:
        if not policy.may_approve(self.agent, extension.by):
            self._record("refused", f"budget extension by {extension.by} ignored: not an approver")
            return
        self.usage.extra_usd += max(0.0, extension.usd)
        self.usage.extra_tokens += max(0, extension.tokens)
        self.usage.extra_iterations += max(0, extension.iterations)
        self._record(
            "message",
            f"{extension.by} extended the budget by ${extension.usd:.2f}, "
            f"{extension.tokens} tokens, {extension.iterations} iterations",
            actor=extension.by,
        )

    @workflow.query
    def status(self) -> TaskStatusView:
        ceilings = budget.Ceilings.for_agent(self.agent, self.usage)
        return TaskStatusView(
            task_id=self.inp.task_id,
            agent=self.agent.name,
            status=self.task_status,
            step=self.step,
            last_action=self.last_action,
            usage=self.usage,
            limits=ceilings.as_dict(),
            pending_approval=self.gate.pending,
            reply=self.reply,
        )

    @workflow.query
    def explain(self) -> Explanation:
        return Explanation(
            task_id=self.inp.task_id,
            status=self.task_status,
            reason=self.decisions[-1] if self.decisions else "",
            next_action=next_action(self.task_status, self.inp.task_id) if self.task_status.finished else "",
            steps=list(self.steps),
            decisions=list(self.decisions),
        )

    # The task ----------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: TaskInput) -> TaskResult:
        if not self.started_at_iso:
            self.started_at_iso = workflow.now().isoformat()
            self._decide(f"started for {inp.context.user} on {inp.context.surface}: {inp.request[:200]}")
            await self._begin()
        try:
            status, reason = await self._loop()
        except TaskStop as stop:
            status, reason = stop.status, stop.reason
        except asyncio.CancelledError:
            status, reason = TaskStatus.CANCELLED, "cancelled from Temporal"
            await asyncio.shield(self._finish_cancelled())
            raise
        return await self._finish(status, reason)

    async def _begin(self) -> None:
        """Tell the surface the task started, recall memory, stage the first prompt."""
        # Local: a quick "working" signal on the surface should not cost a server round trip.
        await workflow.execute_local_activity(
            ActivityName.TASK_STARTED,
            PostReplyInput(self.inp.task_id, self.inp.context, "", TaskStatus.RUNNING, 0),
            **LOCAL_OPTIONS,
        )
        memories = await workflow.execute_local_activity(
            ActivityName.RECALL,
            RecallInput(
                self._memory_scope(),
                self.inp.request,
                self.agent.spec.memory.recall_k,
                self.inp.task_id,
            ),
            result_type=RecallResult,
            **LOCAL_OPTIONS,
        )
        recalled = "\n".join(f"- {item.content}" for item in memories.items)
        self._record("recall", f"recalled {len(memories.items)} memories")
        context = self.inp.context
        system = (
            f"{self.agent.spec.instructions.strip()}\n\n"
            f"You are the agent '{self.agent.name}' answering {context.user} on {context.surface}"
            f" in {context.channel}." + (f"\n\nWhat you remember here:\n{recalled}" if recalled else "")
        )
        self.pending = [
            ChatMessage(role="system", content=system),
            ChatMessage(role="user", content=self.inp.request),
            *self.pending,
        ]

    async def _loop(self) -> tuple[TaskStatus, str]:
        invalid_in_a_row = 0
        steps_this_run = 0
        while True:
            self._check_cancelled()
            if steps_this_run >= self.inp.max_steps_per_run or workflow.info().is_continue_as_new_suggested():
                await self._continue_as_new()
            await self._enforce_ceilings()
            result = await self._call_model()
            steps_this_run += 1
            if result.finish_reason == "length" and not result.tool_calls:
                if self.continuations < MAX_CONTINUATIONS:
                    self.continuations += 1
                    self.reply += result.text
                    self.pending.append(ChatMessage("user", "Continue exactly where you stopped."))
                    continue
            self.continuations = 0
            if not result.tool_calls:
                self.reply += result.text
                if self._asks_user(result.text) and await self._await_follow_up(result.text):
                    continue
                return TaskStatus.SUCCESS, "answered"
            if self._fold_tool_calls(result.tool_calls):
                invalid_in_a_row = 0
                continue
            for call in result.tool_calls:
                outcome = await self._handle_tool_call(call)
                invalid_in_a_row = invalid_in_a_row + 1 if outcome == "invalid" else 0
                if invalid_in_a_row >= policy.MAX_INVALID_TOOL_CALLS_IN_A_ROW:
                    raise TaskStop(
                        TaskStatus.ERROR,
                        f"the model made {invalid_in_a_row} invalid tool calls in a row",
                    )
            self._check_progress()

    # Ending --------------------------------------------------------------------------------

    async def _finish(self, status: TaskStatus, reason: str) -> TaskResult:
        await self.gate.close("cancelled" if status == TaskStatus.CANCELLED else "expired")
        self._set_status(status)
        self._decide(f"stopped: {status.value}: {reason}")
        text = self.reply.strip()
        if status != TaskStatus.SUCCESS:
            text = (text + "\n\n" if text else "") + status_line(status, reason)
        await self._post(text or "(no answer)", status)
        workflow.upsert_search_attributes([search.COST_USD.value_set(round(self.usage.cost_usd, 6))])
        await workflow.wait_condition(workflow.all_handlers_finished)
        return TaskResult(
            task_id=self.inp.task_id,
            status=status,
            reason=reason,
            next_action=next_action(status, self.inp.task_id),
            reply=text,
            usage=self.usage,
            steps=self.step,
        )

    async def _finish_cancelled(self) -> None:
        self._set_status(TaskStatus.CANCELLED)
        await self.gate.close("cancelled")

    async def _continue_as_new(self) -> None:
        await workflow.wait_condition(workflow.all_handlers_finished)
        self._decide(f"continuing as new after step {self.step} (run {self.runs + 1})")
        carried = CarriedState(
            step=self.step,
            transcript_upto=self.transcript_upto,
            usage=self.usage,
            started_at_iso=self.started_at_iso,
            decisions=self.decisions[-50:],
            pending_messages=self.pending,
            progress_signatures=self.signatures[-10:],
            used_request_ids=sorted(self.gate.used_request_ids),
            summary_upto=self.summary_upto,
            continuations=self.continuations,
            runs=self.runs + 1,
            folded_tools=self.folded,
        )
        workflow.continue_as_new(
            TaskInput(
                task_id=self.inp.task_id,
                agent=self.inp.agent,
                agent_version=self.inp.agent_version,
                context=self.inp.context,
                request=self.inp.request,
                task_kind=self.inp.task_kind,
                carried=carried,
                max_steps_per_run=self.inp.max_steps_per_run,
                follow_up_seconds=self.inp.follow_up_seconds,
            )
        )
