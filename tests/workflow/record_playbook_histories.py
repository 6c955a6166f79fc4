"""Record a playbook run's history into tests/workflow/histories/ (the replay gate).

Run by hand after a deliberate, replay-safe change to the playbook run workflow, then commit
the JSON:

    python -m tests.workflow.record_playbook_histories

The real stack (the embedded Postgres, the Temporal dev server, the worker) with the scripted
model API standing in for the provider. The scenario: an entry step whose first answer does
not validate and is asked again, then two steps after it in parallel, one of which emits an
event nobody listens for.
"""

from __future__ import annotations

import asyncio
import os

from activities.llm.providers import API_BASE_ENV
from activities.playbooks.starts import start_listening
from tests.fakes.model_api import FakeModelAPI
from tests.integration.playbook_env import answer_with, field, on_event, playbook, playbook_world
from tests.workflow.record_loop_histories import HISTORIES, real_stack
from workers.history import fetch_history, write_history
from workflows.playbook_types import FieldKind, PlaybookStep

VERDICT = field("verdict", FieldKind.ENUM, "flaky", "real")


async def record() -> None:
    api = FakeModelAPI().start()
    os.environ[API_BASE_ENV], os.environ["OPENAI_API_KEY"] = api.base_url, "sk-test"
    api.answer("It is flaky, I think.")  # no JSON object: asked again
    api.answer(answer_with("A real failure.", verdict="real", notes="test_mean divides by n + 1"))
    for _ in range(2):  # the two parallel steps, in either order
        api.answer(answer_with("Done.", summary="reported"))
    try:
        async with real_stack() as (client, pg_url, root), playbook_world(client, pg_url, root) as world:
            agent = await world.agent()
            summary = (field("summary"),)
            steps = (
                PlaybookStep(
                    name="investigate", agent=agent, instructions="CI failed on {{ event.repo }}.",
                    output=(VERDICT, field("notes")), budget_usd=0.5,
                ),
                PlaybookStep(
                    name="propose", agent=agent, instructions="Fix: {{ investigate.notes }}",
                    after=("investigate",), output=summary, emits="FixProposed",
                ),
                PlaybookStep(
                    name="announce", agent=agent, instructions="Verdict {{ investigate.verdict }}.",
                    after=("investigate",), output=summary,
                ),
            )  # fmt: skip
            name = "ci-triage"
            await world.apply([playbook(name, on_event("CIFailed"), *steps)])
            started = await start_listening(
                client, await world.pool(), world.settings.task_queue, "CIFailed", {"repo": "acme/api"}, "d-1"
            )
            run = await world.finished_run(name)
            history = await fetch_history(client, started.started[0])
            write_history(history, HISTORIES / "playbook_run.json")
            print(f"recorded playbook_run: {run.record.status}, {len(history.events)} events")
    finally:
        api.stop()


if __name__ == "__main__":
    asyncio.run(record())
