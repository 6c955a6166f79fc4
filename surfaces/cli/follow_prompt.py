"""The questions following a task asks on a terminal: approve this `[y/N]`, answer the agent.

A `[y/N]` question races the task: when the request is decided elsewhere (another terminal,
Slack, the dashboard), expires, or the task ends, the question is taken back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import termios

from rich.console import Console
from rich.markup import escape
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from surfaces.cli.approval_view import print_request, what_is_asked
from surfaces.cli.terminal import commands
from surfaces.decisions import decide
from workflows.agent_task import AgentTaskWorkflow
from workflows.approval_rule import may_decide
from workflows.outcomes import next_action
from workflows.types import ApprovalDecision, Decision, TaskResult, TaskStatus, TaskStatusView

POLL_SECONDS = 0.5
ELSEWHERE = object()  # the question was closed: decided elsewhere, or the task moved on


async def prompt_if_waiting(
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
