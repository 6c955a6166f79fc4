"""`openloop explain RUN` and `openloop playbooks show RUN` tell a failed playbook run's story on
the real dev server and Postgres, the scripted model answering: the failed step first with its
task, both answers that did not validate and the reason, the skipped step after it, and the
command that shows why its task stopped; a step's own task id still explains that task."""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import Result
from temporalio.client import Client
from typer.testing import CliRunner

from activities.playbooks.starts import start_listening
from surfaces.cli.main import app
from tests.fakes.model_api import FakeModelAPI
from tests.integration.playbook_env import answer_with, cli_env, field, on_event, playbook, playbook_world
from workers.embedded import TemporalDevServer
from workflows.playbook_types import FieldKind, PlaybookStep


async def openloop(env: dict[str, str], *args: str) -> Result:
    return await asyncio.to_thread(lambda: CliRunner().invoke(app, list(args), env=env))


async def test_a_failed_runs_story_names_the_step_its_task_and_what_to_look_at_next(
    client: Client, dev_server: TemporalDevServer, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    api.answer(answer_with("Looks flaky.", verdict="maybe"))
    api.answer("Still thinking: it is flaky, I am fairly sure.")
    async with playbook_world(client, pg_url, tmp_path) as world:
        agent = await world.agent()
        name = world.name("ci-triage")
        investigate = PlaybookStep(
            name="investigate",
            agent=agent,
            instructions="CI failed on {{ event.repo }}: flaky or real?",
            output=(field("verdict", FieldKind.ENUM, "flaky", "real"),),
        )
        propose = PlaybookStep(name="propose", agent=agent, instructions="Propose.", after=("investigate",))
        await world.apply([playbook(name, on_event(world.name("CIFailed")), investigate, propose)])
        started = await start_listening(
            client, await world.pool(), world.settings.task_queue, world.name("CIFailed"),
            {"repo": "acme/api"}, "delivery-explain",
        )  # fmt: skip
        [run_id] = started.started
        await world.finished_run(name)
        env = cli_env(world, dev_server)
        explained = await openloop(env, "explain", run_id)
        shown = await openloop(env, "playbooks", "show", run_id)
        step_task = await openloop(env, "explain", f"{run_id}.investigate.retry")
        await world.apply([])

    story = explained.output
    assert explained.exit_code == 0, story
    assert story.startswith(f"{run_id}: FAILED"), story
    assert "Reason: step investigate failed: the answer did not have the declared output twice" in story
    assert f"Next: See why its task stopped: `openloop explain {run_id}.investigate.retry`." in story
    first, skipped = story.index("1. investigate  FAILED"), story.index("2. propose  SKIPPED")
    assert first < story.index(f"task {run_id}.investigate.retry · agent {agent} · SUCCESS") < skipped
    assert "2 answer(s) did not validate" in story
    assert "reason  upstream step investigate failed" in story[skipped:]
    assert shown.exit_code == 0 and "status   FAILED: step investigate failed" in shown.output, shown.output
    assert f"next     See why its task stopped: `openloop explain {run_id}.investigate.retry`" in shown.output
    # The step's task is a task: explain tells its own decisions.
    assert step_task.exit_code == 0, step_task.output
    assert step_task.output.startswith(f"{run_id}.investigate.retry: SUCCESS"), step_task.output
    assert "Decisions (from" in step_task.output
