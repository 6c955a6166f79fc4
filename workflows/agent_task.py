"""AgentTaskWorkflow: one agent task, from request to reply, durable across crashes and waits.

The story: say on the surface that the task started, recall memory, then step — check the
ceilings, ask the model, run the tools it asks for (each validated, permitted, bounded and,
where the config says so, approved by a person) — until the model answers without tools;
then post the answer and say how the task ended.

The work is done by small parts this class composes: the task record (steps, decisions,
status), the usage meter (ceilings, grants, charges), the conversation (where the task
stands in its stored transcript), the approval gate, the tool runner, the model caller and
the waits on people. Workflow code: deterministic, no I/O, no clocks but workflow.now().
"""

from __future__ import annotations

import asyncio
import dataclasses

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows import policy, prompts, search
    from workflows.activity_options import LOCAL_OPTIONS
    from workflows.code_types import WorkspaceState
    from workflows.delegate_tool import CHILD_WAITING_SIGNAL, ChildWait
    from workflows.outcomes import NO_ANSWER, final_text, next_action, no_answer_reason
    from workflows.tool_catalog import ToolSet
    from workflows.types import (
        DECIDE_UPDATE,
        WORKFLOW_NAME,
        ActivityName,
        ApprovalDecision,
        BudgetExtension,
        BudgetUsage,
        CancelRequest,
        CarriedState,
        ChatMessage,
        Decision,
        DecisionVerdict,
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

# Workflow logic, checked by the sandbox like this module.
from workflows.admission_types import ADMITTED_SIGNAL
from workflows.approvals import ApprovalGate
from workflows.conversation import Conversation
from workflows.decisions import Decisions
from workflows.delegation import Delegation
from workflows.human_waits import HumanWaits
from workflows.mcp_tools import McpTools
from workflows.model_caller import ModelCaller
from workflows.task_admission import TaskAdmission
from workflows.task_record import Cancellation, TaskRecord, TaskStop, failure_reason
from workflows.task_status import status_view
from workflows.task_workspace import TaskWorkspace
from workflows.tool_dispatch import ToolDispatch
from workflows.tool_runner import ToolRunner
from workflows.tools import skill_specs
from workflows.usage_meter import UsageMeter
from workflows.workflow_tool import TaskParts

MAX_CONTINUATIONS = 3  # a reply cut off by the output limit is continued this many times
CONTINUE = "Continue exactly where you stopped."


@workflow.defn(name=WORKFLOW_NAME)
class AgentTaskWorkflow:
    @workflow.init
    def __init__(self, inp: TaskInput) -> None:
        carried = inp.carried or CarriedState(0, 0, BudgetUsage(), "", [], [], [], [])
        self.inp = inp
        self.agent = inp.agent
        self.started_at_iso = carried.started_at_iso
        self.runs = carried.runs
        self.continuations = carried.continuations
        self.reply = ""
        self.notices: list[str] = []  # said before the answer (an MCP server that was down)
        self.cancellation = Cancellation()
        self.record = TaskRecord(carried.step, list(carried.decisions))
        self.meter = UsageMeter(inp.agent, carried.usage)
        self.conversation = Conversation(
            carried.transcript_upto, carried.summary_upto, list(carried.pending_messages)
        )
        self.gate = ApprovalGate(inp, set(carried.used_request_ids))
        self.admission = TaskAdmission(inp, self.record, self.cancellation)
        memory = policy.memory_scope(inp.agent, inp.context)
        self.workspace = TaskWorkspace(inp, self.record, memory, carried.workspace)
        self.specs = ToolSet(inp.tools)  # the specs the task started with
        if inp.skills:
            self.specs.add(skill_specs())
        self.children = Delegation(inp, self.record, self.meter, self.specs)
        self.mcp = McpTools(inp, self.specs, self.record)
        parts = TaskParts(inp, self.specs, self.record, self.meter, self.children, self.workspace)
        dispatch = ToolDispatch(parts, self.mcp)
        self.tools = ToolRunner(parts, dispatch, self.conversation, self.gate, self.cancellation, carried)
        self.waits = HumanWaits(inp, self.record, self.meter, self.conversation, self.cancellation)
        self.model = ModelCaller(inp, self.record, self.meter, self.conversation, self.tools, self.waits)
        self.decisions = Decisions(inp, self.gate, self.waits.extenders, self.meter, self.record)

    # Updates, signals and queries --------------------------------------------------------

    @workflow.update(name=DECIDE_UPDATE)
    def decide(self, decision: Decision) -> DecisionVerdict:
        """How every surface decides: approve, deny or extend, and hear at once if it counted."""
        return self.decisions.take(decision)

    @decide.validator
    def validate_decision(self, decision: Decision) -> None:
        self.decisions.validate(decision)

    @workflow.signal
    async def approve(self, decision: ApprovalDecision) -> None:
        await self.gate.receive(decision, approved=True, now=workflow.now())

    @workflow.signal
    async def deny(self, decision: ApprovalDecision) -> None:
        await self.gate.receive(decision, approved=False, now=workflow.now())

    @workflow.signal
    def user_message(self, message: UserMessage) -> None:
        self.conversation.add("user", f"{message.user}: {message.text}")
        self.record.record("message", f"{message.user} added: {message.text[:120]}", actor=message.user)

    @workflow.signal
    def cancel(self, request: CancelRequest) -> None:
        self.cancellation.request = request
        self.children.cancel_children()

    @workflow.signal
    def extend_budget(self, extension: BudgetExtension) -> None:
        self.decisions.extend(extension)

    @workflow.signal(name=ADMITTED_SIGNAL)
    def admitted(self) -> None:
        self.admission.admit()

    @workflow.signal(name=CHILD_WAITING_SIGNAL)
    def child_waiting(self, wait: ChildWait) -> None:
        self.children.child_waiting(wait)

    @workflow.query
    def status(self) -> TaskStatusView:
        return status_view(self.inp.task_id, self.record, self.meter, self.gate, self.children, self.reply)

    @workflow.query
    def explain(self) -> Explanation:
        return self.record.explanation(self.inp.task_id)

    @workflow.query
    def workspace_state(self) -> WorkspaceState | None:
        """The workspace, its diff and tests (`openloop tasks diff`)."""
        return self.workspace.state

    # The task ----------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: TaskInput) -> TaskResult:
        try:
            if not self.started_at_iso:
                self.record.decide(
                    f"started for {inp.context.user} on {inp.context.surface}: {inp.request[:200]}"
                )
                await self.admission.wait_for_slot()  # time in line is not the task's wall clock
                self.started_at_iso = workflow.now().isoformat()
                await self._begin()
            # Each run stores what its model calls share, once, before the first of them.
            await self.model.save_task_constants()
            status, reason = await self._steps()
        except TaskStop as stop:
            status, reason = stop.status, stop.reason
            self.reply = stop.reply if stop.reply is not None else self.reply
        except asyncio.CancelledError:
            self.record.set_status(TaskStatus.CANCELLED)
            await asyncio.shield(self.gate.close("cancelled"))
            await asyncio.shield(self.admission.leave())
            raise
        return await self._finish(status, reason)

    async def _begin(self) -> None:
        """Tell the surface the task started, recall memory, stage the first prompt."""
        # Local: a quick "working" signal on the surface should not cost a server round trip.
        # A subagent answers its parent, not the surface.
        if self.inp.parent is None:
            await workflow.execute_local_activity(
                ActivityName.TASK_STARTED,
                PostReplyInput(self.inp.task_id, self.inp.context, "", TaskStatus.RUNNING, 0),
                **LOCAL_OPTIONS,
            )
        scope = self.tools.memory
        memories = await workflow.execute_local_activity(
            ActivityName.RECALL,
            RecallInput(scope, self.inp.request, self.agent.spec.memory.recall_k, self.inp.task_id),
            result_type=RecallResult,
            **LOCAL_OPTIONS,
        )
        self.record.record("recall", f"recalled {len(memories.items)} memories")
        self.notices = await self.mcp.list_tools()
        first = [ChatMessage("system", prompts.system_prompt(self.agent, self.inp.context, self.inp.skills))]
        if memories.items:
            first.append(ChatMessage("user", prompts.recalled_memories(memories.items, scope.scope)))
        first.append(ChatMessage("user", self.inp.request))
        self.conversation.pending[:0] = first

    async def _steps(self) -> tuple[TaskStatus, str]:
        invalid_in_a_row = 0
        steps_this_run = 0
        while True:
            self.cancellation.check()
            if steps_this_run >= self.inp.max_steps_per_run or workflow.info().is_continue_as_new_suggested():
                await self._continue_as_new()
            summary = await self.model.enforce_ceilings(self.started_at_iso, answered=bool(self.reply))
            self.reply = summary if summary is not None else self.reply
            result = await self.model.ask_step()
            steps_this_run += 1
            if result.finish_reason == "length" and not result.tool_calls:
                if self.continuations < MAX_CONTINUATIONS:
                    self.continuations += 1
                    self.reply += result.text
                    self.conversation.add("user", CONTINUE)
                    continue
            self.continuations = 0
            if not result.tool_calls:
                if result.finish_reason == "refused" or (
                    result.finish_reason in NO_ANSWER and not (self.reply + result.text).strip()
                ):
                    raise TaskStop(TaskStatus.ERROR, no_answer_reason(result))
                self.reply += result.text
                if result.text.rstrip().endswith("?") and await self.waits.answer_to(result.text):
                    self.reply = ""
                    continue
                return TaskStatus.SUCCESS, "answered"
            if self.tools.fold(result.tool_calls):
                invalid_in_a_row = 0
                continue
            for outcome in await self.tools.handle_all(result.tool_calls):
                invalid_in_a_row = invalid_in_a_row + 1 if outcome == "invalid" else 0
                if invalid_in_a_row >= policy.MAX_INVALID_TOOL_CALLS_IN_A_ROW:
                    raise TaskStop(
                        TaskStatus.ERROR, f"the model made {invalid_in_a_row} invalid tool calls in a row"
                    )
            self.tools.check_progress()

    # Ending --------------------------------------------------------------------------------

    async def _finish(self, status: TaskStatus, reason: str) -> TaskResult:
        await self.gate.close("cancelled" if status == TaskStatus.CANCELLED else "expired")
        reply = self.reply.strip()
        text = final_text([*self.notices, reply, *self.workspace.closing_lines(reply)], status, reason)
        # The status says how the task ended only once its answer is out.
        self.record.decide(f"stopped: {status.value}: {reason}")
        try:
            await self.waits.post(text or "(no answer)", status)
        except ActivityError as err:
            status, reason = TaskStatus.ERROR, f"the answer could not be posted: {failure_reason(err)}"
            self.record.decide(f"stopped: {status.value}: {reason}")
        self.record.set_status(status)
        await self.admission.leave()
        workflow.upsert_search_attributes([search.COST_USD.value_set(round(self.meter.usage.cost_usd, 6))])
        # A cancelled task still completes as a workflow: the memo says how it ended.
        workflow.upsert_memo({"outcome": f"{status.value}: {reason}"[:300]})
        await workflow.wait_condition(workflow.all_handlers_finished)
        return TaskResult(
            task_id=self.inp.task_id,
            status=status,
            reason=reason,
            next_action=next_action(status, self.inp.task_id),
            reply=text,
            usage=self.meter.usage,
            steps=self.record.step,
        )

    async def _continue_as_new(self) -> None:
        await workflow.wait_condition(workflow.all_handlers_finished)
        self.record.decide(f"continuing as new after step {self.record.step} (run {self.runs + 1})")
        carried = CarriedState(
            step=self.record.step,
            transcript_upto=self.conversation.upto,
            usage=self.meter.usage,
            started_at_iso=self.started_at_iso,
            decisions=self.record.decisions[-50:],
            pending_messages=self.conversation.pending,
            progress_signatures=self.tools.signatures[-10:],
            used_request_ids=sorted(self.gate.used_request_ids),
            summary_upto=self.conversation.summary_upto,
            continuations=self.continuations,
            runs=self.runs + 1,
            folded_tools=self.tools.folded,
            workspace=self.workspace.state,
        )
        # Everything else (skills, the parent of a subagent, limits) goes on as it was.
        tools = self.specs.specs  # with the MCP tools listed at the start
        workflow.continue_as_new(dataclasses.replace(self.inp, carried=carried, tools=tools))
