"""Model calls of a task: a step (with tools), a final answer (without), a summary.

Workflow code: deterministic, no I/O. Each call is one `openloop.model.call` activity that
appends the pending messages to the stored transcript and returns only what the workflow
decides on. Usage is charged here, once; a call the budget refused waits for an extension
and is asked again.

What every call of a task shares (agent, routes, tools, caps, where folded tools act) is
stored once per run (`save_task_constants`) and left out of each call's input, which keeps
history per step small.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows import budget
    from workflows.activity_options import LOCAL_OPTIONS, MODEL_OPTIONS
    from workflows.outcomes import next_action
    from workflows.task_constants import SAVE_TASK_CONSTANTS, SaveTaskConstantsInput, TaskConstants
    from workflows.types import (
        ActivityName,
        FoldedTools,
        ModelCallInput,
        ModelCallResult,
        StreamTarget,
        TaskInput,
        TaskStatus,
    )

from workflows.conversation import Conversation
from workflows.human_waits import HumanWaits
from workflows.task_record import TaskRecord, TaskStop, failure_reason
from workflows.tool_runner import ToolRunner
from workflows.usage_meter import UsageMeter

NO_STEPS_LEFT = (
    "You have no steps left. Without tools, summarise what you did, what you found and what is left to do."
)
WRAP_UP = "You are close to your step limit: wrap up and answer now."
STEP, FINAL, SUMMARY = "step", "final", "summary"


class ModelCaller:
    def __init__(
        self,
        inp: TaskInput,
        record: TaskRecord,
        meter: UsageMeter,
        conversation: Conversation,
        tools: ToolRunner,
        waits: HumanWaits,
    ) -> None:
        self.inp = inp
        self.agent = inp.agent
        self.record = record
        self.meter = meter
        self.conversation = conversation
        self.tools = tools
        self.waits = waits
        self.stored_tools: list[str] = []  # the tools this run stored: a call offering others names them

    async def save_task_constants(self) -> None:
        """Store what every model call of this run shares, once, before the first call."""
        constants = self._constants()
        # Local: one quick write at the start, in the same workflow task as the recall.
        await workflow.execute_local_activity(
            SAVE_TASK_CONSTANTS, SaveTaskConstantsInput(self.inp.task_id, constants), **LOCAL_OPTIONS
        )
        self.stored_tools = constants.tool_names

    def _constants(self) -> TaskConstants:
        policy = self.agent.spec.model_policy
        spend = self.agent.spec.budget
        return TaskConstants(
            agent_name=self.agent.name,
            workspace=self.agent.workspace,
            channel=self.inp.context.channel,
            surface=self.inp.context.surface,
            models=policy.models_for(self.inp.task_kind),
            summary_models=policy.models_for("summarize_conversation"),
            tool_names=list(self.tools.names),
            on_exceeded=spend.on_exceeded,
            monthly_usd=spend.monthly_usd,
            channel_monthly_usd=spend.per_channel_monthly_usd,
            context_window=policy.context_window,
            context=self.inp.context,
            memory=self.tools.memory,
            output_schema=self.inp.output_schema,
        )

    async def enforce_ceilings(self, started_at_iso: str, *, answered: bool) -> str | None:
        """Stop, or wait for an extension, when a ceiling is reached before the next step.
        Iterations that run out mid-task get one last call without tools: its summary is
        returned as the answer."""
        hit = self.meter.check(started_at_iso)
        if hit is None:
            return None
        self.record.decide(f"ceiling reached ({hit.ceiling}): {hit.reason}")
        summary = None
        if hit.ceiling == "iterations" and not answered:
            self.conversation.add("user", NO_STEPS_LEFT)
            summary = (await self.ask_final()).text
        try:
            if not hit.resumable:
                raise TaskStop(hit.status, hit.reason)
            await self.waits.budget_extension(hit)
        except TaskStop as stop:
            stop.reply = summary if summary is not None else stop.reply
            raise
        return summary

    async def ask_step(self) -> ModelCallResult:
        """One step: the model answers or asks for tools (summarising first when the prompt
        has grown past its share of the context window)."""
        if self.meter.should_wrap_up():
            self.conversation.add("user", WRAP_UP)
        self.record.step += 1
        if self.conversation.needs_compaction(self.agent.spec.model_policy.context_window):
            await self.summarise()
            self.record.step += 1
        return await self._ask(STEP, self.tools.names)

    async def ask_final(self) -> ModelCallResult:
        """One last call without tools."""
        self.record.step += 1
        return await self._ask(FINAL, [])

    async def summarise(self) -> None:
        summary = await self._execute(SUMMARY, [])
        if summary.finish_reason == "budget":
            self.record.record("model", "could not summarise: the budget refused the call")
            return
        self.conversation.summary_upto = summary.transcript_upto
        self.meter.charge(summary.usage, iteration=False)
        self.record.record("model", "summarised the conversation to stay within the context window")

    async def _ask(self, purpose: str, tool_names: list[str]) -> ModelCallResult:
        self.record.last_action = f"asking the model (step {self.record.step})"
        result = await self._execute(purpose, tool_names)
        self.conversation.last_prompt_tokens = result.usage.prompt_tokens
        self.conversation.last_context_window = result.context_window or self.conversation.last_context_window
        self.record.last_model = result.usage.model or self.record.last_model
        self.meter.charge(result.usage, iteration=purpose == STEP)
        self.record.record(
            "model",
            f"{result.usage.model}: {len(result.tool_calls)} tool call(s), "
            f"{result.usage.prompt_tokens}+{result.usage.completion_tokens} tokens",
            cost=result.usage.cost_usd,
        )
        if result.finish_reason != "budget":
            return result
        reason = result.refused_reason or "the budget cannot cover the next call"
        self.record.decide(f"model call refused by the budget: {result.refused_reason}")
        if not result.refused_resumable:
            raise TaskStop(TaskStatus.BUDGET_EXHAUSTED, result.refused_reason or "budget exhausted")
        hit = budget.CeilingHit(
            TaskStatus.BUDGET_EXHAUSTED,
            "usd",
            reason,
            next_action(TaskStatus.BUDGET_EXHAUSTED, self.inp.task_id),
            resumable=True,
        )
        await self.waits.budget_extension(hit)
        return await (self.ask_step() if purpose == STEP else self.ask_final())

    def _input(self, purpose: str, tool_names: list[str], fold: FoldedTools | None) -> ModelCallInput:
        """Only what differs from the task's stored constants rides in the input: the tools,
        when a call offers others than the run stored (none for a last answer; others once a
        skill narrowed them or a workspace opened)."""
        route = self.agent.spec.model_policy.models_for(
            "summarize_conversation" if purpose == SUMMARY else self.inp.task_kind
        )
        return ModelCallInput(
            task_id=self.inp.task_id,
            step=self.record.step,
            cursor=self.conversation.cursor(),
            purpose=purpose,
            stream=self._stream_target(purpose),
            model=route[0] if route else None,
            tool_names=None if tool_names == self.stored_tools else tool_names,
            budget=self.meter.grant(),
            fold=fold.calls if fold else None,
        )

    def _stream_target(self, purpose: str) -> StreamTarget | None:
        """Where a Slack task's answer streams while it is written: any call that may be the
        answer (a step answers when it calls no tools), never a summary or a subagent's."""
        context = self.inp.context
        if purpose == SUMMARY or self.inp.parent is not None or context.surface != "slack":
            return None
        if context.thread is None:  # nothing to stream into
            return None
        return StreamTarget(context.channel, context.thread, context.user)

    async def _execute(self, purpose: str, tool_names: list[str]) -> ModelCallResult:
        folded = self.tools.folded_input()  # they run inside this call, before it asks
        inp = self._input(purpose, tool_names, folded)
        cursor = inp.cursor
        try:
            result: ModelCallResult = await workflow.execute_activity(
                ActivityName.CALL_MODEL, inp, result_type=ModelCallResult, **MODEL_OPTIONS
            )
        except ActivityError as err:
            raise TaskStop(TaskStatus.ERROR, f"the model call failed: {failure_reason(err)}") from None
        self.conversation.stored(result, len(cursor.new_messages))
        if result.streamed_ts:
            self.waits.streamed.append(result.streamed_ts)
        if folded:
            self.tools.folded_ran(folded, result.tool_results)
        return result
