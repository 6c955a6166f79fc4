"""`openloop tasks diff TASK_ID [--stat]`: a coding task's workspace diff, as stored.

The task itself says which diff its workspace holds (the `workspace_state` query: the diff's
hash after its last change, and its tests); the diff is read from Postgres by that hash, the
same bytes an approval would commit. On a terminal it is coloured like `git diff`; anywhere
else it is the patch exactly, so `openloop tasks diff ID | git apply` works. `--stat` prints
the diff's stat and the tests before and after instead.
Exit codes: 0 ok (also for a workspace with no changes), 1 no workspace or no stored diff,
2 Temporal or the database unreachable, or no worker to answer for the task.
"""

from __future__ import annotations

import sys
from typing import Annotated

import psycopg
import typer
from rich.markup import escape
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError

from activities.store.db import close_pools, get_pool
from activities.store.loops import load_diff
from config.settings import Settings
from surfaces.cli.approval_view import diff_text
from surfaces.cli.observe import tasks_app
from surfaces.cli.observe_run import EXIT_FAILED, EXIT_UNAVAILABLE, Fail, output, run
from surfaces.cli.terminal import make_console
from surfaces.task_lookup import QUERY_TIMEOUT, describe_task, worker_is_polling
from workflows import code_text
from workflows.agent_task import AgentTaskWorkflow
from workflows.code_types import WorkspaceState


def register(app: typer.Typer) -> None:
    tasks_app.command("diff")(diff)


async def workspace_state(client: Client, task_id: str) -> WorkspaceState | None:
    """What the task knows of its workspace; a worker replays the task to answer."""
    description = await describe_task(client, task_id)
    if not await worker_is_polling(client, description.task_queue or ""):
        raise Fail(
            f"no worker is running for {task_id} (queue {description.task_queue}) to say which diff "
            "its workspace holds; start one with `openloop worker` or `openloop up`",
            EXIT_UNAVAILABLE,
        )
    handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
    try:
        return await handle.query(AgentTaskWorkflow.workspace_state, rpc_timeout=QUERY_TIMEOUT)
    except (WorkflowQueryFailedError, WorkflowQueryRejectedError, RPCError, TimeoutError) as exc:
        raise Fail(f"{task_id} did not say which diff its workspace holds: {exc}", EXIT_UNAVAILABLE) from None


def stat_lines(state: WorkspaceState) -> list[str]:
    """The diff's stat and the tests before and after (and which diff they ran on)."""
    assert state.diff is not None
    configured = bool(state.setup.verify)
    after = code_text.describe_tests(state.tests_after, configured, state.tests_before)
    if state.tests_after is not None and state.tests_after.diff_sha256 not in ("", state.diff.sha256):
        after += " (on an earlier diff)"
    return [
        f"{code_text.describe_diff(state.diff)} (sha256 {state.diff.sha256[:12]})",
        f"tests before: {code_text.describe_tests(state.tests_before, configured)}",
        f"tests after: {after}",
    ]


def _write_patch(patch: bytes) -> None:
    """The patch on stdout: coloured on a terminal, else the exact bytes (for `git apply`)."""
    if sys.stdout.isatty():
        output().print(diff_text(patch.decode(errors="replace")), end="")
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(patch)
    sys.stdout.buffer.flush()


def diff(
    task_id: Annotated[str, typer.Argument(help="The coding task (workflow) id.")],
    stat: Annotated[bool, typer.Option("--stat", help="Only the stat and the tests before/after.")] = False,
) -> None:
    """A coding task's workspace diff: the patch (coloured on a terminal), or --stat."""

    async def work(settings: Settings, client: Client | None) -> None:
        assert client is not None
        state = await workspace_state(client, task_id)
        if state is None:
            raise Fail(f"{task_id} has no workspace: it never opened one (code.open_workspace)", EXIT_FAILED)
        where = state.setup.repo.github or state.setup.repo.path or "the repository"
        if state.diff is None or state.diff.files_changed == 0:
            # On stderr: a pipe gets an empty patch, not a sentence.
            base = state.setup.repo.base
            note = f"No changes in the workspace of {escape(where)} at {escape(base)}."
            make_console(stderr=True).print(note)
            return
        if stat:
            for line in stat_lines(state):
                output().print(escape(line))
            return
        try:
            patch = await load_diff(await get_pool(settings.require_database_url()), state.diff.sha256)
        except psycopg.Error as exc:
            raise Fail(f"cannot read the diff from the database: {exc}", EXIT_UNAVAILABLE) from None
        finally:
            await close_pools()
        if patch is None:
            raise Fail(
                f"the diff {state.diff.sha256[:12]} of {task_id} is not stored in this database "
                "(OPENLOOP_DATABASE_URL); the workspace changed but its diff was never saved",
                EXIT_FAILED,
            )
        _write_patch(patch)

    run(work)
