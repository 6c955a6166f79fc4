"""The parts of a task step: the model call with its ceilings, tool calls with their
checks and approvals, and the waits on humans (budget extensions, follow-up answers).

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

# Workflow logic: imported inside the sandbox, so it is checked like this module.

with workflow.unsafe.imports_passed_through():
    from workflows import budget, policy
    from workflows.activity_options import (
        LOCAL_TOOL_OPTIONS,
        MODEL_OPTIONS,
        TOOL_OPTIONS,
    )
    from workflows.outcomes import next_action, status_line
    from workflows.tool_catalog import NATIVE_TOOLS, catalog_tool_name, model_tool_name
    from workflows.types import (
        ActivityName,
        ChatMessage,
        FoldedToolCall,
        FoldedTools,
        ModelCallInput,
        ModelCallResult,
        TaskStatus,
        ToolCall,
        ToolCallInput,
        ToolCallResult,
        TranscriptView,
    )

from workflows.task_state import TaskState, TaskStop, failure_reason

COMPACT_AT_SHARE = 0.6  # summarise the conversation when the prompt passes this share
DEFAULT_CONTEXT_WINDOW = 128_000
AUDIT_INVALID_TOOL_CALLS = "audit-invalid-tool-calls"  # workflow.patched id
FOLD_LOCAL_TOOLS = "fold-local-tools"  # workflow.patched id


class TaskSteps(TaskState):
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
        result = await self._execute_model(self._model_input(purpose, tools, ceilings))
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
                raise TaskStop(TaskStatus.BUDGET_EXHAUSTED, result.refused_reason or "budget exhausted")
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
            run_first=(
                FoldedTools(list(self.folded), self.inp.context, self._memory_scope())
                if self.folded
                else None
            ),
        )

    async def _execute_model(self, inp: ModelCallInput) -> ModelCallResult:
        try:
            result: ModelCallResult = await workflow.execute_activity(
                ActivityName.CALL_MODEL, inp, result_type=ModelCallResult, **MODEL_OPTIONS
            )
        except ActivityError as err:
            raise TaskStop(TaskStatus.ERROR, f"the model call failed: {failure_reason(err)}") from None
        if inp.run_first:
            self.folded = []
            for call, outcome in zip(inp.run_first.calls, result.tool_results, strict=True):
                self._tool_ran(call.tool, call.arguments, outcome, step=call.step)
            self._check_progress()
        return result

    async def _summarise_conversation(self) -> None:
        ceilings = budget.Ceilings.for_agent(self.agent, self.usage)
        summary = await self._execute_model(self._model_input("summary", [], ceilings))
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
            raise TaskStop(hit.status, hit.reason)
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
            raise TaskStop(TaskStatus.BUDGET_EXHAUSTED, hit.reason)
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
                raise TaskStop(
                    TaskStatus.APPROVAL_EXPIRED,
                    f"nobody approved {name} within {self.agent.spec.approvals.ttl}",
                )
            if decision.outcome == "denied":
                self._record("approval", f"{name} denied by {decision.by}", actor=decision.by)
                if self.agent.spec.approvals.on_denied == "stop":
                    raise TaskStop(TaskStatus.APPROVAL_DENIED, f"{decision.by} denied {name}")
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
            tool_input = ToolCallInput.for_call(
                self.inp.task_id,
                self.step,
                call.id,
                name,
                arguments,
                self.inp.context,
                self._memory_scope(),
                approval,  # type: ignore[arg-type]
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
            result = ToolCallResult(ok=False, output=f"Error: {failure_reason(err)}", error_kind="failed")
        self._tool_message(call, result.output, result.output_ref)
        self._tool_ran(name, arguments, result)
        return "ok" if result.ok else "failed"

    def _tool_ran(
        self, name: str, arguments: dict[str, object], result: ToolCallResult, step: int | None = None
    ) -> None:
        self.signatures.append(policy.progress_signature(name, arguments, result.output))
        self._record(
            "tool", f"{name}: {'ok' if result.ok else result.error_kind}: {result.output[:120]}", step=step
        )

    def _check_progress(self) -> None:
        repeats = policy.repeats_at_end(self.signatures)
        if repeats >= self.agent.spec.limits.no_progress_repeats:
            raise TaskStop(
                TaskStatus.NO_PROGRESS,
                f"the same tool call returned the same result {repeats} times in a row",
            )

    def _fold_tool_calls(self, calls: list[ToolCall]) -> bool:
        """Queue the step's calls to run inside the next model call, saving each its own round
        trip, when every one is a valid, allowed, read-only local tool that needs no approval
        and none could complete a no-progress streak (that is checked before the next call)."""
        if policy.repeats_at_end(self.signatures) + len(calls) >= self.agent.spec.limits.no_progress_repeats:
            return False
        folded = []
        for call in calls:
            name = catalog_tool_name(call.name)
            tool = NATIVE_TOOLS.get(name)
            if tool is None or not tool.local or tool.writes or policy.needs_approval(self.agent, name):
                return False
            check = policy.check_tool_call(self.agent, name, call.arguments)
            if not check.allowed:
                return False
            folded.append(FoldedToolCall(self.step, call.id, name, check.arguments))
        # Tasks started before folding replay their local tool activities.
        if not workflow.patched(FOLD_LOCAL_TOOLS):
            return False
        self.folded.extend(folded)
        self.last_action = f"running {', '.join(c.tool for c in folded)} with the next model call"
        return True

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

    # Ending --------------------------------------------------------------------------------
