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
import time
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from surfaces.cli.follow_prompt import POLL_SECONDS, prompt_if_waiting
from surfaces.cli.terminal import commands
from surfaces.task_lookup import qualified_reason
from workflows.agent_task import AgentTaskWorkflow
from workflows.outcomes import next_action
from workflows.types import StepRecord, TaskResult, TaskStatus, TaskStatusView

FINAL_QUERY_TRIES = 3


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
                waiting = await prompt_if_waiting(
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
