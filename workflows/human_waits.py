"""Waits on people: a budget extension, an answer to the agent's question, and the posts
that tell the task's surface about them.

Workflow code: deterministic, no I/O. Every wait is a durable timer (days if need be) that a
cancel ends early; time spent waiting is not charged to the task's wall clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import budget
    from workflows.activity_options import SURFACE_OPTIONS
    from workflows.outcomes import status_line
    from workflows.types import ActivityName, PostReplyInput, TaskInput, TaskStatus

from workflows.budget_extenders import BudgetExtenders
from workflows.conversation import Conversation
from workflows.task_record import Cancellation, TaskRecord, TaskStop
from workflows.usage_meter import UsageMeter

MAX_DONE_LINES = 10


class HumanWaits:
    def __init__(
        self,
        inp: TaskInput,
        record: TaskRecord,
        meter: UsageMeter,
        conversation: Conversation,
        cancellation: Cancellation,
    ) -> None:
        self.inp = inp
        self.record = record
        self.meter = meter
        self.conversation = conversation
        self.cancellation = cancellation
        # Slack messages the model streamed the answer into: the next post edits them.
        self.streamed: list[str] = []
        self.asked = ""  # the question posted last, which nobody answered yet
        self.extenders = BudgetExtenders(inp)  # who may extend the budget: the approvers

    async def post(self, text: str, status: TaskStatus, *, answer: bool = True) -> None:
        """Post in the task's thread; an `answer` takes the place of what was streamed of it."""
        if self.inp.parent is not None:
            return  # a subagent's answer goes to its parent, as the tool result
        streamed: list[str] = []
        if answer:
            streamed, self.streamed = self.streamed, []
        if answer and self.asked and text.startswith(self.asked):
            text = text[len(self.asked) :].strip()  # an unanswered question is not asked again
        if status == TaskStatus.CANCELLED:
            text = f"{text}\n\n{self.done_so_far()}"
        await workflow.execute_activity(
            ActivityName.POST_REPLY,
            PostReplyInput(self.inp.task_id, self.inp.context, text, status, self.record.step, streamed),
            **SURFACE_OPTIONS,
        )

    def done_so_far(self) -> str:
        """What a stopped task did before it stopped, from its record (tools and approvals)."""
        done = [f"• {s.summary[:160]}" for s in self.record.steps if s.kind in ("tool", "approval")]
        if not done:
            return "Nothing had been done yet."
        shown = done[-MAX_DONE_LINES:]
        earlier = f"\n(and {len(done) - len(shown)} earlier step(s))" if len(done) > len(shown) else ""
        return "What was done before it stopped:\n" + "\n".join(shown) + earlier

    async def wait(self, condition: Callable[[], bool], timeout_seconds: float) -> bool:
        """Wait for `condition` or a cancel; the wait is not charged as wall clock."""
        started = workflow.now()
        try:
            await workflow.wait_condition(
                lambda: condition() or self.cancellation.requested,
                timeout=timedelta(seconds=timeout_seconds),
            )
            satisfied = True
        except TimeoutError:
            satisfied = False
        self.meter.waited((workflow.now() - started).total_seconds())
        self.cancellation.check()
        return satisfied

    async def budget_extension(self, hit: budget.CeilingHit) -> None:
        """Report the stop and wait for an approver to extend the budget, up to the approval TTL."""
        if self.inp.parent is not None:
            raise TaskStop(TaskStatus.BUDGET_EXHAUSTED, hit.reason)  # its slice is all it gets
        before = self.meter.ceilings
        await self.extenders.resolve(self.meter.usage.iterations)
        self.record.set_status(TaskStatus.WAITING_BUDGET)
        await self.post(
            status_line(TaskStatus.BUDGET_EXHAUSTED, hit.reason)
            + "\n"
            + hit.next_action.replace("TASK_ID", self.inp.task_id),
            TaskStatus.BUDGET_EXHAUSTED,
            answer=False,
        )
        extended = await self.wait(
            lambda: self.meter.ceilings != before, self.inp.agent.spec.approvals.ttl_seconds
        )
        if not extended:
            raise TaskStop(TaskStatus.BUDGET_EXHAUSTED, hit.reason)
        self.record.set_status(TaskStatus.RUNNING)
        self.record.decide("budget extended; resuming where it stopped")

    async def answer_to(self, question: str) -> bool:
        """The model asked the user something: post it and wait for an answer in the thread."""
        if self.inp.parent is not None:
            return False  # a subagent's question is its answer, for the parent to take up
        await self.post(question, TaskStatus.WAITING_USER)
        self.asked = question
        self.record.set_status(TaskStatus.WAITING_USER)
        answered = await self.wait(lambda: bool(self.conversation.pending), self.inp.follow_up_seconds)
        if answered:
            self.asked = ""
        self.record.set_status(TaskStatus.RUNNING)
        return answered
