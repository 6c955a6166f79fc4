"""The CLI surface: `openloop ask`, `approve`, `reply`, `cancel`, `extend`.

Like every surface it only starts, signals or updates workflows: `approve`, `deny` and
`extend` go through the task's decision update (`surfaces.decisions.decide`) and say at once
whether the decision counted, or why not (exit 1). `ask` then follows the task live
(`surfaces.cli.follow`) until it finishes. With no terminal to answer on, `ask` stops
following when the task waits for a person and prints the command that moves it on
(exit 0), unless `--timeout` says how long to follow (exit 3 if it is still running then).
Exit codes: 0 answered (or left waiting for a person), 1 stopped without success, 2 bad
input or unreachable, 3 still running when --timeout ran out.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import typer
from rich.markup import escape
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError
from temporalio.types import MethodSyncOrAsyncSingleParam

from activities.store.agents import get_agent
from activities.store.db import close_pools, get_pool
from config.settings import Settings
from surfaces.cli.approval_view import what_is_asked
from surfaces.cli.errors import CliError, require_database, rpc_problem
from surfaces.cli.follow import Followed, follow_task
from surfaces.cli.terminal import commands, make_console
from surfaces.client import connect
from surfaces.decisions import NO_ANSWER, decide, status_of
from surfaces.task_lookup import describe_task
from surfaces.tasks import start_task, task_id_for
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import (
    ApprovalDecision,
    BudgetExtension,
    CancelRequest,
    Decision,
    DecisionVerdict,
    SurfaceContext,
    TaskStatus,
    UserMessage,
)

console = make_console()
EXIT_STILL_RUNNING = 3
SignalArg = TypeVar("SignalArg")
T = TypeVar("T")


def default_user() -> str:
    """Who the CLI acts as: OPENLOOP_USER, else `cli:local`, the approver the examples name."""
    return os.environ.get("OPENLOOP_USER") or "cli:local"


def register(app: typer.Typer) -> None:
    @app.command()
    def ask(
        agent: str = typer.Argument(..., help="The agent's name"),
        text: str = typer.Argument(..., help="What to ask"),
        channel: str = typer.Option("cli", "--channel", "-c", help="Memory channel for this task"),
        kind: str = typer.Option("chat", "--kind", help="Task kind for model routing"),
        user: str = typer.Option(default_user(), "--as", help="Who is asking"),
        follow: bool = typer.Option(True, "--follow/--no-follow", help="Follow the task live"),
        timeout: float | None = typer.Option(
            None,
            "--timeout",
            min=0,
            help="Follow for at most this many seconds; with no terminal, also through approvals.",
        ),
    ) -> None:
        """Start a task and follow it: steps, approval prompts, the final reply."""
        followed = asyncio.run(_closing_pools(_ask(agent, text, channel, kind, user, follow, timeout)))
        if followed is None:
            return
        if followed.left == "timeout":
            raise typer.Exit(EXIT_STILL_RUNNING)
        if followed.result is not None and followed.result.status != TaskStatus.SUCCESS:
            raise typer.Exit(1)

    @app.command()
    def approve(
        task_id: str,
        deny: bool = typer.Option(False, "--deny", help="Deny instead of approve"),
        user: str = typer.Option(default_user(), "--as", help="Approver identity"),
    ) -> None:
        """Approve (or deny) the action a task is waiting on."""
        asyncio.run(_closing_pools(_decide(task_id, user, not deny)))

    @app.command()
    def deny(
        task_id: str,
        user: str = typer.Option(default_user(), "--as", help="Approver identity"),
    ) -> None:
        """Deny the action a task is waiting on (same as `approve --deny`)."""
        asyncio.run(_closing_pools(_decide(task_id, user, False)))

    @app.command()
    def reply(task_id: str, text: str, user: str = typer.Option(default_user(), "--as")) -> None:
        """Answer a task that asked a question (a follow-up joins the running task)."""
        asyncio.run(_signal(task_id, AgentTaskWorkflow.user_message, UserMessage(user, text), "a reply"))
        console.print(f"Sent to {task_id}.")

    @app.command()
    def cancel(
        task_id: str,
        reason: str = typer.Option("", "--reason"),
        user: str = typer.Option(default_user(), "--as"),
    ) -> None:
        """Cancel a task; a pending approval is resolved as not approved."""
        asyncio.run(_signal(task_id, AgentTaskWorkflow.cancel, CancelRequest(user, reason), "a cancel"))
        console.print(f"Cancel requested for {task_id}.")

    @app.command()
    def extend(
        task_id: str,
        usd: float = typer.Option(0.0, "--usd"),
        tokens: int = typer.Option(0, "--tokens"),
        iterations: int = typer.Option(0, "--iterations"),
        user: str = typer.Option(default_user(), "--as", help="An approver of the agent"),
    ) -> None:
        """Raise a paused task's per-task ceiling; it resumes where it stopped."""
        if usd <= 0 and tokens <= 0 and iterations <= 0:
            console.print("[red]Give at least one of --usd, --tokens, --iterations.[/]")
            raise typer.Exit(2)
        extension = BudgetExtension(user, usd, tokens, iterations)
        asyncio.run(_closing_pools(_send(Settings.from_env(), None, task_id, Decision(extend=extension))))
        console.print(
            f"Extended the budget of {task_id} by ${usd:.2f}, {tokens} tokens, {iterations} "
            f"iterations as {user}; a task paused by it resumes where it stopped."
        )


async def _client(settings: Settings) -> Client:
    return await connect(settings)  # unreachable: one line, exit 2 (surfaces.cli.errors)


async def _closing_pools(work: Coroutine[Any, Any, T]) -> T:
    """Run `work`, then close the database pools it opened while the loop still runs: a pool
    left to the interpreter's exit can crash it (its connections close from a dead loop)."""
    try:
        return await work
    finally:
        await close_pools()


async def _ask(
    agent_name: str,
    text: str,
    channel: str,
    kind: str,
    user: str,
    follow: bool,
    follow_seconds: float | None,
) -> Followed | None:
    settings = Settings.from_env()
    url = settings.require_database_url()
    await asyncio.to_thread(require_database, url)  # down: at once, not after the pool's wait
    pool = await get_pool(url)
    stored = await get_agent(pool, agent_name)
    if stored is None:
        hint = commands("openloop agents apply -f FILE")
        console.print(f"[red]No agent named {agent_name!r}.[/] Apply one: {hint}")
        raise typer.Exit(2)
    client = await _client(settings)
    context = SurfaceContext(surface="cli", channel=channel, user=user, event_id=uuid.uuid4().hex)
    handle, _ = await start_task(
        client,
        settings,
        stored,
        context,
        text,
        task_id=task_id_for("cli", context.event_id or ""),
        task_kind=kind,
    )
    console.print(f"[bold]Task[/] {handle.id}  (agent {stored.name} v{stored.version})")
    ui = settings.temporal_ui_port
    console.print(f"  Web UI: http://localhost:{ui}/namespaces/{settings.namespace}/workflows/{handle.id}")
    if not follow:
        console.print(f"  Follow it: {commands('openloop tasks show ' + handle.id)}")
        return None
    interactive = sys.stdin.isatty()
    followed = await follow_task(
        handle,
        console,
        interactive=interactive,
        user=user,
        leave_when_waiting=not interactive and follow_seconds is None,
        follow_seconds=follow_seconds,
        database_url=settings.database_url,
    )
    if followed.left == "waiting":
        console.print(
            "No terminal to answer on, so this command returns; the task keeps waiting. "
            f"Check on it: {commands('openloop explain ' + handle.id)}"
        )
    return followed


async def _decide(task_id: str, user: str, approved: bool) -> None:
    settings = Settings.from_env()
    client = await _client(settings)
    description = await describe_task(client, task_id)  # no such task: one line, exit 1
    if description.status != WorkflowExecutionStatus.RUNNING:
        raise CliError(
            f"task {task_id} has already finished ({status_of(description)}): there is nothing to "
            f"decide; `openloop explain {task_id}` tells how it ended"
        )
    handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
    # The decision names the request it answers: the one pending now, as the task tells it.
    status = await handle.query(AgentTaskWorkflow.status)
    pending = status.pending_approval
    if pending is None:
        console.print(f"[red]{task_id} is not waiting for an approval[/] (status {status.status.value}).")
        raise typer.Exit(1)
    answer = ApprovalDecision(pending.request_id, pending.action_id, user)
    await _send(settings, client, task_id, Decision(approve=answer) if approved else Decision(deny=answer))
    verb = "Approved" if approved else "Denied"
    console.print(f"{verb} {pending.tool} {what_is_asked(pending)} as {user}.")


async def _send(settings: Settings, client: Client | None, task_id: str, decision: Decision) -> None:
    """Send a decision to the task; say why and exit 1 unless it counted."""
    client = client or await _client(settings)
    try:
        verdict = await decide(client.get_workflow_handle(task_id), settings.database_url, decision)
    except RPCError as exc:
        raise rpc_problem(exc, task_id) from None
    if verdict.problem == NO_ANSWER:
        later = "a worker that picks the task up judges it then"
        console.print(f"[yellow]Not confirmed:[/] {escape(verdict.reason)}; {later}.")
        raise typer.Exit(1)
    if not verdict.counted:
        console.print(f"[red]Not counted:[/] {escape(_not_counted(verdict))}")
        raise typer.Exit(1)


def _not_counted(verdict: DecisionVerdict) -> str:
    """Why a decision did not count, and who may decide instead."""
    if verdict.problem == "not_approver":
        return f"{verdict.reason}; approvers: {', '.join(verdict.approvers) or 'nobody'}"
    return verdict.reason


async def _signal(
    task_id: str,
    signal: MethodSyncOrAsyncSingleParam[AgentTaskWorkflow, SignalArg, None],
    arg: SignalArg,
    what: str,
) -> None:
    client = await _client(Settings.from_env())
    handle = client.get_workflow_handle(task_id)
    try:
        await handle.signal(signal, arg)
    except RPCError as exc:
        raise rpc_problem(exc, task_id, what) from None
