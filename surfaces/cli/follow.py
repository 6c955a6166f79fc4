"""Following a task live from the CLI: every step in order, approval prompts, the answer.

Used by `openloop ask` and `openloop up --demo`. The task is read through its `status`
and `explain` queries: `status` first, then `explain`, so the steps printed always include
the step that led to what the status shows (an approval is announced after the model
call that asked for it). When the task ends, its steps are read once more, so the last
ones are printed before the answer.

With no terminal to answer on, `ask` does not wait for a person: it prints the exact command
that would move the task on and returns, unless told to follow for a while (`--timeout`).
On a terminal, the `[y/N]` question races the task: when the approval is decided elsewhere
(another terminal, Slack, the dashboard), expires, or the task ends, the question is taken
back and following goes on to the reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import termios
import time
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from surfaces.cli.approval_view import print_request, what_is_asked
from surfaces.cli.terminal import commands
from surfaces.decisions import decide
from surfaces.task_lookup import qualified_reason
from workflows.agent_task import AgentTaskWorkflow
from workflows.approval_rule import may_decide
from workflows.outcomes import next_action
from workflows.types import ApprovalDecision, Decision, StepRecord, TaskResult, TaskStatus, TaskStatusView

POLL_SECONDS = 0.5
FINAL_QUERY_TRIES = 3
ELSEWHERE = object()  # the question was closed: decided elsewhere, or the task moved on


@dataclass
class Followed:
    """How following ended: the task's result, or why it was left running."""

    result: TaskResult | None = None
    left: str = ""  # "waiting" (a person must act), "timeout" (--timeout ran out)


class _Printer:
    """Prints each step record once, in the order the task recorded them."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.seen: set[tuple[int, str, str, str]] = set()
        self.steps: list[StepRecord] = []

    def new(self, steps: list[StepRecord]) -> None:
        for record in steps:
            key = (record.step, record.kind, record.summary, record.at_iso)
            if key in self.seen:
                continue
            self.seen.add(key)
            self.steps.append(record)
            cost = f"  ${record.cost_usd:.4f}" if record.cost_usd else ""
            self.out.print(f"  [dim]step {record.step}[/] {record.kind:<8} {escape(record.summary)}{cost}")


async def follow_task(
    handle: WorkflowHandle[AgentTaskWorkflow, TaskResult],
    out: Console,
    *,
    interactive: bool,
    user: str,
    leave_when_waiting: bool = False,
    follow_seconds: float | None = None,
    database_url: str | None = None,
    answers: int | None = None,
) -> Followed:
    """Print each new step as it happens; prompt for approval when the task waits on one.

    `leave_when_waiting`: return once the task waits for a person nobody here can be asked
    (no terminal). `follow_seconds`: return when it has not finished after this many seconds.
    `database_url`: where a decision made at the prompt that did not count is audited.
    `answers`: the file descriptor a prompt reads its answer from (default: stdin). A prompt
    is taken back when the request is decided elsewhere or the task ends, and following goes on.
    """
    printer = _Printer(out)
    prompted: set[str] = set()
    deadline = None if follow_seconds is None else time.monotonic() + follow_seconds
    result_task = asyncio.create_task(handle.result())
    try:
        while not result_task.done():
            status: TaskStatusView | None = None
            try:
                status = await handle.query(AgentTaskWorkflow.status)
                printer.new((await handle.query(AgentTaskWorkflow.explain)).steps)
            except RPCError:
                status = None
            if status is not None:
                waiting = await _prompt(
                    handle,
                    out,
                    status,
                    prompted,
                    interactive=interactive,
                    user=user,
                    database_url=database_url,
                    result_task=result_task,
                    answers=answers,
                )
                if waiting and leave_when_waiting:
                    return Followed(left="waiting")
            if deadline is not None and time.monotonic() >= deadline:
                state = status.status.value if status else "running"
                out.print(
                    f"[yellow]Still {state}[/] after {follow_seconds:g} s; "
                    f"the task goes on. Follow it: {commands('openloop tasks show ' + handle.id)}"
                )
                return Followed(left="timeout")
            await asyncio.wait({result_task}, timeout=POLL_SECONDS)
        result = result_task.result()
    finally:
        if not result_task.done():
            result_task.cancel()
    await _last_steps(handle, printer)
    _print_result(out, handle.id, result, printer.steps)
    return Followed(result=result)


async def _prompt(
    handle: WorkflowHandle[AgentTaskWorkflow, TaskResult],
    out: Console,
    status: TaskStatusView,
    prompted: set[str],
    *,
    interactive: bool,
    user: str,
    result_task: asyncio.Future[TaskResult],
    answers: int | None,
    database_url: str | None = None,
) -> bool:
    """Announce (once) what the task waits for; ask here when we can. True: it waits on a person."""
    pending = status.pending_approval
    if pending is not None:
        if pending.request_id not in prompted:
            prompted.add(pending.request_id)
            # Asked here when the task would take this user's decision (its resolved approvers).
            mine = may_decide(pending, user)
            approver = user if mine else "APPROVER"
            out.print(f"[yellow]Approval needed[/] for [bold]{pending.tool}[/] {what_is_asked(pending)}")
            print_request(out, pending)
            out.print(
                f"  approvers: {', '.join(pending.approvers)}; expires {pending.expires_at_iso}\n"
                f"  approve: {commands(f'openloop approve {handle.id} --as {approver}')}"
                f"   deny: {commands(f'openloop deny {handle.id} --as {approver}')}"
            )
            if interactive and mine:
                answer = await _answer_unless_decided(
                    handle,
                    out,
                    f"Approve {pending.tool} as {user}?",
                    pending.request_id,
                    result_task,
                    answers,
                )
                if answer is ELSEWHERE:
                    out.print("\n  [dim]No longer asked here: decided elsewhere, or the task moved on.[/]")
                    return False
                if answer is None:
                    return True  # no answer (end of input): it waits for an approver
                said = ApprovalDecision(pending.request_id, pending.action_id, user)
                verdict = await decide(
                    handle, database_url, Decision(approve=said) if answer else Decision(deny=said)
                )
                if not verdict.counted:
                    out.print(f"[red]Not counted:[/] {escape(verdict.reason)}")
                return not verdict.counted
        return True
    if status.status == TaskStatus.WAITING_USER and status.reply:
        if "asked" not in prompted:
            prompted.add("asked")
            out.print(
                f"[cyan]The agent asks:[/] {escape(status.reply)}\n"
                f"  answer: {commands(f'openloop reply {handle.id} ' + chr(34) + '…' + chr(34))}"
            )
        return True
    if status.status == TaskStatus.QUEUED:
        if "queued" not in prompted:  # the agent is at its task limit; said once
            prompted.add("queued")
            out.print(f"[yellow]Queued:[/] {escape(status.last_action)}")
        return True
    if status.status == TaskStatus.WAITING_BUDGET:
        if "budget" not in prompted:
            prompted.add("budget")
            out.print(f"[yellow]Paused:[/] {escape(status.last_action)}")
            out.print(commands(next_action(TaskStatus.BUDGET_EXHAUSTED, handle.id)))
        return True
    prompted.discard("asked")
    prompted.discard("budget")
    return False


async def _answer_unless_decided(
    handle: WorkflowHandle[AgentTaskWorkflow, TaskResult],
    out: Console,
    question: str,
    request_id: str,
    result_task: asyncio.Future[TaskResult],
    answers: int | None,
) -> bool | None | object:
    """The person's answer, raced with the task: an approver deciding elsewhere (another
    terminal, Slack, the dashboard) or the task ending closes the question (`ELSEWHERE`)."""
    fd = sys.stdin.fileno() if answers is None else answers
    asked = asyncio.ensure_future(_confirm(question, out, fd))
    watched = asyncio.ensure_future(_decided_elsewhere(handle, request_id, result_task))
    try:
        await asyncio.wait({asked, watched}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in (asked, watched):
            waiting.cancel()
    if asked.done() and not asked.cancelled():
        return asked.result()
    return ELSEWHERE


async def _decided_elsewhere(
    handle: WorkflowHandle[AgentTaskWorkflow, TaskResult],
    request_id: str,
    result_task: asyncio.Future[TaskResult],
) -> None:
    """Returns once the task no longer waits on `request_id` (decided, expired, or ended)."""
    while not result_task.done():
        try:
            status = await handle.query(AgentTaskWorkflow.status)
        except RPCError:
            status = None  # a late answer: ask again
        if status is not None and (
            status.pending_approval is None or status.pending_approval.request_id != request_id
        ):
            return
        await asyncio.wait({result_task}, timeout=POLL_SECONDS)


async def _confirm(question: str, out: Console, answers: int) -> bool | None:
    """Ask yes/no, reading the answer from the file descriptor `answers` on the event loop,
    so the question can be taken back (the task moved on) and Ctrl-C never waits for Enter.
    What was typed before the question is not its answer. None: end of input."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    pending = b""

    def readable() -> None:
        nonlocal pending
        try:
            chunk = os.read(answers, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            loop.remove_reader(answers)
            lines.put_nowait(None)
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            lines.put_nowait(line.decode(errors="replace"))

    if os.isatty(answers):
        with contextlib.suppress(termios.error):
            termios.tcflush(answers, termios.TCIFLUSH)
    loop.add_reader(answers, readable)
    try:
        while True:
            out.print(escape(f"{question} [y/N]: "), end="")
            line = await lines.get()
            if line is None:
                out.print()
                return None
            said = line.strip().lower()
            if said in ("y", "yes"):
                return True
            if said in ("", "n", "no"):
                return False
            out.print("Please answer y or n.")
    finally:
        loop.remove_reader(answers)


async def _last_steps(handle: WorkflowHandle[AgentTaskWorkflow, TaskResult], printer: _Printer) -> None:
    """The steps recorded since the last poll: a finished task still answers queries."""
    for _ in range(FINAL_QUERY_TRIES):
        try:
            printer.new((await handle.query(AgentTaskWorkflow.explain)).steps)
            return
        except RPCError:
            await asyncio.sleep(POLL_SECONDS)
    printer.out.print(f"  [dim](later steps: {commands('openloop tasks show ' + handle.id)})[/]")


def _print_result(out: Console, task_id: str, result: TaskResult, steps: list[StepRecord]) -> None:
    colour = "green" if result.status == TaskStatus.SUCCESS else "red"
    approvals = [step.summary for step in steps if step.kind == "approval"]
    reason = qualified_reason(result.status, result.reason, approvals)
    out.print(f"\n{escape(result.reply)}\n")
    out.print(
        f"[{colour}]{result.status.value}[/] — {escape(reason)}; {result.steps} steps, "
        f"{result.usage.tokens} tokens, ${result.usage.cost_usd:.4f}"
    )
    if result.status != TaskStatus.SUCCESS:
        action = next_action(result.status, task_id, surface="cli") or result.next_action
        out.print(f"Next: {escape(commands(action))}")
