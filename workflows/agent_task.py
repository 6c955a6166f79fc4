"""AgentTaskWorkflow: one agent task, from request to reply, durable across crashes and waits.

The loop: check ceilings -> model activity -> for each tool call: validate, check
permissions, ask for approval if the config says so (a signal, waited on for days if need
be), run the tool activity -> repeat until the model answers without tools -> reply.

Deterministic: no I/O, no clocks but workflow.now(). The transcript lives in Postgres and
only references and small results ride in history, so history grows linearly with steps.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

# Workflow logic: imported inside the sandbox, so it is checked like this module.
from workflows.approvals import ApprovalGate

with workflow.unsafe.imports_passed_through():
    from workflows import budget, policy, search
    from workflows.activity_options import (
        LOCAL_OPTIONS,
        LOCAL_TOOL_OPTIONS,
        MODEL_OPTIONS,
        SURFACE_OPTIONS,
        TOOL_OPTIONS,
    )
    from workflows.outcomes import next_action, status_line
    from workflows.tool_catalog import NATIVE_TOOLS, catalog_tool_name, model_tool_name
    from workflows.types import (
        WORKFLOW_NAME,
        ActivityName,
        ApprovalDecision,
        BudgetExtension,
        BudgetUsage,
        CancelRequest,
        CarriedState,
        ChatMessage,
        Explanation,
        MemoryScopeRef,
        ModelCallInput,
        ModelCallResult,
        PostReplyInput,
        RecallInput,
        RecallResult,
        StepRecord,
        TaskInput,
        TaskResult,
        TaskStatus,
        TaskStatusView,
        ToolCall,
        ToolCallInput,
        ToolCallResult,
        TranscriptView,
        UserMessage,
    )

MAX_CONTINUATIONS = 3  # a reply cut off by the output limit is continued this many times
COMPACT_AT_SHARE = 0.6  # summarise the conversation when the prompt passes this share
DEFAULT_CONTEXT_WINDOW = 128_000
MAX_STEP_RECORDS = 200
AUDIT_INVALID_TOOL_CALLS = "audit-invalid-tool-calls"  # workflow.patched id


class _Stop(Exception):
    """Ends the loop with a status; raised inside the workflow only."""

    def __init__(self, status: TaskStatus, reason: str):
        self.status = status
        self.reason = reason
        super().__init__(reason)


@workflow.defn(name=WORKFLOW_NAME)
class AgentTaskWorkflow:
    @workflow.init
    def __init__(self, inp: TaskInput) -> None:
        self.inp = inp
        self.agent = inp.agent
        carried = inp.carried
        self.step = carried.step if carried else 0
        self.transcript_upto = carried.transcript_upto if carried else 0
        self.summary_upto = carried.summary_upto if carried else 0
        self.usage = carried.usage if carried else BudgetUsage()
        self.started_at_iso = carried.started_at_iso if carried else ""
        self.decisions: list[str] = list(carried.decisions) if carried else []
        self.pending: list[ChatMessage] = list(carried.pending_messages) if carried else []
        self.signatures: list[str] = list(carried.progress_signatures) if carried else []
        self.continuations = carried.continuations if carried else 0
        self.runs = carried.runs if carried else 1
        self.steps: list[StepRecord] = []
        self.task_status = TaskStatus.RUNNING
        self.last_action = "starting"
        self.reply = ""
        self.last_prompt_tokens = 0
        self.cancel_request: CancelRequest | None = None
        self.gate = ApprovalGate(inp, set(carried.used_request_ids) if carried else set())

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
        except _Stop as stop:
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
            for call in result.tool_calls:
                outcome = await self._handle_tool_call(call)
                invalid_in_a_row = invalid_in_a_row + 1 if outcome == "invalid" else 0
                if invalid_in_a_row >= policy.MAX_INVALID_TOOL_CALLS_IN_A_ROW:
                    raise _Stop(
                        TaskStatus.ERROR,
                        f"the model made {invalid_in_a_row} invalid tool calls in a row",
                    )
            repeats = policy.repeats_at_end(self.signatures)
            if repeats >= self.agent.spec.limits.no_progress_repeats:
                raise _Stop(
                    TaskStatus.NO_PROGRESS,
                    f"the same tool call returned the same result {repeats} times in a row",
                )

    # Model ---------------------------------------------------------------------------------

    async def _call_model(self, *, purpose: str = "step", allow_tools: bool = True) -> ModelCallResult:
        ceilings = budget.Ceilings.for_agent(self.agent, self.usage)
        if purpose == "step" and budget.should_wrap_up(ceilings, self.usage):
            self.pending.append(
                ChatMessage("user", "You are close to your step limit: wrap up and answer now.")
            )
        self.step += 1
        tools = [t.name for t in self.agent.spec.tools if t.name in NATIVE_TOOLS] if allow_tools else []
        window = self.agent.spec.model_policy.context_window or DEFAULT_CONTEXT_WINDOW
        if purpose == "step" and self.last_prompt_tokens > COMPACT_AT_SHARE * window:
            await self._summarise_conversation()
            self.step += 1
        self.last_action = f"asking the model (step {self.step})"
        try:
            result: ModelCallResult = await workflow.execute_activity(
                ActivityName.CALL_MODEL,
                self._model_input(purpose, tools, ceilings),
                result_type=ModelCallResult,
                **MODEL_OPTIONS,
            )
        except ActivityError as err:
            raise _Stop(TaskStatus.ERROR, f"the model call failed: {_cause(err)}") from None
        self.pending = []
        self.transcript_upto = result.transcript_upto
        self.last_prompt_tokens = result.usage.prompt_tokens
        self.usage.iterations += 1 if purpose == "step" else 0
        self.usage.prompt_tokens += result.usage.prompt_tokens
        self.usage.completion_tokens += result.usage.completion_tokens
        self.usage.cost_usd += result.usage.cost_usd
        self._record(
            "model",
            f"{result.usage.model}: {len(result.tool_calls)} tool call(s), "
            f"{result.usage.prompt_tokens}+{result.usage.completion_tokens} tokens",
            cost=result.usage.cost_usd,
        )
        if result.finish_reason == "budget":
            self._decide(f"model call refused by the budget: {result.refused_reason}")
            if not result.refused_resumable:
                raise _Stop(TaskStatus.BUDGET_EXHAUSTED, result.refused_reason or "budget exhausted")
            await self._pause_for_budget(
                budget.CeilingHit(
                    TaskStatus.BUDGET_EXHAUSTED,
                    "usd",
                    result.refused_reason or "the budget cannot cover the next call",
                    next_action(TaskStatus.BUDGET_EXHAUSTED, self.inp.task_id),
                    resumable=True,
                )
            )
            return await self._call_model(purpose=purpose, allow_tools=allow_tools)
        return result

    def _model_input(self, purpose: str, tools: list[str], ceilings: budget.Ceilings) -> ModelCallInput:
        return ModelCallInput(
            task_id=self.inp.task_id,
            step=self.step,
            agent_name=self.agent.name,
            workspace=self.agent.workspace,
            channel=self.inp.context.channel,
            surface=self.inp.context.surface,
            models=self.agent.spec.model_policy.models_for(
                "summarize_conversation" if purpose == "summary" else self.inp.task_kind
            ),
            transcript_upto=self.transcript_upto,
            new_messages=list(self.pending),
            tool_names=tools,
            max_tokens=budget.clamp_max_tokens(ceilings, self.usage),
            usd_headroom=budget.usd_headroom(ceilings, self.usage),
            token_headroom=budget.token_headroom(ceilings, self.usage),
            on_exceeded=self.agent.spec.budget.on_exceeded,
            monthly_usd=self.agent.spec.budget.monthly_usd,
            channel_monthly_usd=self.agent.spec.budget.per_channel_monthly_usd,
            view=TranscriptView(summary_upto=self.summary_upto),
            purpose=purpose,
        )

    async def _summarise_conversation(self) -> None:
        ceilings = budget.Ceilings.for_agent(self.agent, self.usage)
        summary = await workflow.execute_activity(
            ActivityName.CALL_MODEL,
            self._model_input("summary", [], ceilings),
            result_type=ModelCallResult,
            **MODEL_OPTIONS,
        )
        self.pending = []
        self.transcript_upto = summary.transcript_upto
        if summary.finish_reason == "budget":
            self._record("model", "could not summarise: the budget refused the call")
            return
        self.summary_upto = summary.transcript_upto
        self.usage.prompt_tokens += summary.usage.prompt_tokens
        self.usage.completion_tokens += summary.usage.completion_tokens
        self.usage.cost_usd += summary.usage.cost_usd
        self._record("model", "summarised the conversation to stay within the context window")

    # Ceilings ------------------------------------------------------------------------------

    def _active_seconds(self) -> float:
        started = datetime.fromisoformat(self.started_at_iso)
        return (workflow.now() - started).total_seconds() - self.usage.waited_seconds

    async def _enforce_ceilings(self) -> None:
        ceilings = budget.Ceilings.for_agent(self.agent, self.usage)
        hit = budget.check_ceilings(ceilings, self.usage, self._active_seconds())
        if hit is None:
            return
        self._decide(f"ceiling reached ({hit.ceiling}): {hit.reason}")
        if hit.ceiling == "iterations" and not self.reply:
            # Iterations ran out mid-task: one last call without tools writes a summary.
            self.pending.append(
                ChatMessage(
                    "user",
                    "You have no steps left. Without tools, summarise what you "
                    "did, what you found and what is left to do.",
                )
            )
            final = await self._call_model(purpose="final", allow_tools=False)
            self.reply = final.text
        if not hit.resumable:
            raise _Stop(hit.status, hit.reason)
        await self._pause_for_budget(hit)

    async def _pause_for_budget(self, hit: budget.CeilingHit) -> None:
        """Report BUDGET_EXHAUSTED and wait for an approver to extend it, up to the approval TTL."""
        before = budget.Ceilings.for_agent(self.agent, self.usage)
        self._set_status(TaskStatus.WAITING_BUDGET)
        await self._post(
            status_line(TaskStatus.BUDGET_EXHAUSTED, hit.reason) + f"\n{hit.next_action}",
            TaskStatus.BUDGET_EXHAUSTED,
        )
        extended = await self._wait_human(
            lambda: budget.Ceilings.for_agent(self.agent, self.usage) != before,
            self.agent.spec.approvals.ttl_seconds,
        )
        if not extended:
            raise _Stop(TaskStatus.BUDGET_EXHAUSTED, hit.reason)
        self._set_status(TaskStatus.RUNNING)
        self._decide("budget extended; resuming where it stopped")

    # Tools ---------------------------------------------------------------------------------

    async def _handle_tool_call(self, call: ToolCall) -> str:
        """Validate, authorise, maybe wait for approval, run. Returns ok|invalid|refused|denied|failed."""
        name = catalog_tool_name(call.name)
        check = policy.check_tool_call(self.agent, name, call.arguments)
        if not check.allowed:
            self._tool_message(call, f"Error: {check.problem}")
            self._record("refused", f"{name}: {check.problem}")
            # Invalid calls are audited too; tasks started before that replay without it.
            if check.kind != "invalid" or workflow.patched(AUDIT_INVALID_TOOL_CALLS):
                await self.gate.audit(
                    self.step, call.id, "tool_refused", name, check.arguments, check.problem
                )
            return "invalid" if check.kind == "invalid" else "refused"
        approval = None
        if policy.needs_approval(self.agent, name):
            self._set_status(TaskStatus.WAITING_APPROVAL)
            self.last_action = f"waiting for approval of {name}"
            waited_from = workflow.now()
            decision = await self.gate.request(
                self.step,
                call.id,
                name,
                check.arguments,
                self._cheapest_model(),
                cancelled=lambda: self.cancel_request is not None,
            )
            self.usage.waited_seconds += (workflow.now() - waited_from).total_seconds()
            self._set_status(TaskStatus.RUNNING)
            self._check_cancelled()
            if decision.outcome == "expired":
                raise _Stop(
                    TaskStatus.APPROVAL_EXPIRED,
                    f"nobody approved {name} within {self.agent.spec.approvals.ttl}",
                )
            if decision.outcome == "denied":
                self._record("approval", f"{name} denied by {decision.by}", actor=decision.by)
                if self.agent.spec.approvals.on_denied == "stop":
                    raise _Stop(TaskStatus.APPROVAL_DENIED, f"{decision.by} denied {name}")
                self._tool_message(call, f"The approver {decision.by} denied this action; do not retry it.")
                return "denied"
            self._record("approval", f"{name} approved by {decision.by}", actor=decision.by)
            approval = decision.record
        return await self._run_tool(call, name, check.arguments, approval)

    async def _run_tool(
        self, call: ToolCall, name: str, arguments: dict[str, object], approval: object
    ) -> str:
        self.last_action = f"running {name}"
        try:
            tool_input = ToolCallInput(
                task_id=self.inp.task_id,
                step=self.step,
                call_id=call.id,
                tool=name,
                arguments=arguments,
                idempotency_key=f"{self.inp.task_id}:{self.step}:{call.id}",
                context=self.inp.context,
                memory=self._memory_scope(),
                requested_by=self.inp.context.user,
                approval=approval,  # type: ignore[arg-type]
            )
            if NATIVE_TOOLS[name].local:
                result: ToolCallResult = await workflow.execute_local_activity(
                    ActivityName.RUN_TOOL, tool_input, result_type=ToolCallResult, **LOCAL_TOOL_OPTIONS
                )
            else:
                result = await workflow.execute_activity(
                    ActivityName.RUN_TOOL, tool_input, result_type=ToolCallResult, **TOOL_OPTIONS
                )
        except ActivityError as err:
            result = ToolCallResult(ok=False, output=f"Error: {_cause(err)}", error_kind="failed")
        self._tool_message(call, result.output, result.output_ref)
        self.signatures.append(policy.progress_signature(name, arguments, result.output))
        self._record("tool", f"{name}: {'ok' if result.ok else result.error_kind}: {result.output[:120]}")
        return "ok" if result.ok else "failed"

    def _tool_message(self, call: ToolCall, content: str, ref: str | None = None) -> None:
        self.pending.append(
            ChatMessage(
                role="tool",
                content=content,
                tool_call_id=call.id,
                name=model_tool_name(catalog_tool_name(call.name)),
                content_ref=ref,
            )
        )

    # Humans --------------------------------------------------------------------------------

    async def _wait_human(self, condition: object, timeout_seconds: float) -> bool:
        """Wait (durably) for `condition` or a cancel; waiting time is not charged as wall clock."""
        started = workflow.now()
        try:
            await workflow.wait_condition(
                lambda: bool(condition()) or self.cancel_request is not None,  # type: ignore[operator]
                timeout=timedelta(seconds=timeout_seconds),
            )
            satisfied = True
        except TimeoutError:
            satisfied = False
        self.usage.waited_seconds += (workflow.now() - started).total_seconds()
        self._check_cancelled()
        return satisfied

    @staticmethod
    def _asks_user(text: str) -> bool:
        return text.rstrip().endswith("?")

    async def _await_follow_up(self, question: str) -> bool:
        """The model asked the user something: post it and wait for an answer in the thread."""
        await self._post(question, TaskStatus.WAITING_USER)
        self._set_status(TaskStatus.WAITING_USER)
        answered = await self._wait_human(lambda: bool(self.pending), self.inp.follow_up_seconds)
        self._set_status(TaskStatus.RUNNING)
        if answered:
            self.reply = ""
        return answered

    def _check_cancelled(self) -> None:
        if self.cancel_request is not None:
            by = self.cancel_request.by
            raise _Stop(
                TaskStatus.CANCELLED,
                f"cancelled by {by}"
                + (f": {self.cancel_request.reason}" if self.cancel_request.reason else ""),
            )

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

    # Helpers -------------------------------------------------------------------------------

    async def _post(self, text: str, status: TaskStatus) -> None:
        await workflow.execute_activity(
            ActivityName.POST_REPLY,
            PostReplyInput(self.inp.task_id, self.inp.context, text, status, self.step),
            **SURFACE_OPTIONS,
        )

    def _memory_scope(self) -> MemoryScopeRef:
        memory = self.agent.spec.memory
        key = {
            "channel": f"{self.inp.context.surface}:{self.inp.context.channel}",
            "agent": self.agent.name,
            "workspace": self.agent.workspace,
        }[memory.scope.value]
        return MemoryScopeRef(
            workspace=self.agent.workspace,
            agent=self.agent.name,
            scope=memory.scope.value,
            scope_key=key,
            embedding=memory.embedding,
            retention_days=memory.retention_days,
        )

    def _cheapest_model(self) -> str:
        return self.agent.spec.model_policy.models_for(self.inp.task_kind)[0]

    def _set_status(self, status: TaskStatus) -> None:
        if status != self.task_status:
            self.task_status = status
            workflow.upsert_search_attributes([search.STATUS.value_set(status.value)])

    def _decide(self, text: str) -> None:
        self.decisions.append(text)

    def _record(self, kind: str, summary: str, cost: float = 0.0, actor: str | None = None) -> None:
        self.steps.append(StepRecord(self.step, kind, summary, workflow.now().isoformat(), cost, actor))
        del self.steps[:-MAX_STEP_RECORDS]
        self.last_action = summary[:200]


def _cause(err: BaseException) -> str:
    """The innermost message of an activity failure, for the reason a person reads."""
    while err.__cause__ is not None:
        err = err.__cause__
    if isinstance(err, ApplicationError):
        return err.message
    return str(err) or type(err).__name__
