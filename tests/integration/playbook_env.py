"""A playbook runtime's world for the tests: the ordinary worker on a fresh task queue, applied
agents on a priced model the scripted model API answers for, compiled playbooks built the way
the compiler builds them, helpers to wait for a run's stored record, and the environment of
`openloop` commands run against a world."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client

from activities.playbooks.apply import ApplyResult, apply_playbooks
from activities.store import playbooks as playbook_rows
from activities.store.agents import apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from tests.fakes.model_api import FakeModelAPI
from workers.embedded import TemporalDevServer
from workers.worker import build_worker
from workflows.playbook_calls import SensorPoll
from workflows.playbook_types import (
    CompiledPlaybook,
    EventType,
    FieldKind,
    PlaybookRunStatus,
    PlaybookStep,
    Trigger,
    TriggerKind,
    TypedField,
)

MODEL = "openai/gpt-4o-mini"


def field(name: str, kind: FieldKind = FieldKind.STR, *choices: str) -> TypedField:
    return TypedField(name=name, kind=kind, choices=choices)


def playbook(name: str, trigger: Trigger, *steps: PlaybookStep) -> CompiledPlaybook:
    """A compiled playbook whose content hash covers everything in it, as the compiler's does."""
    made_of = json.dumps([trigger.model_dump(mode="json"), [s.model_dump(mode="json") for s in steps]])
    digest = hashlib.sha256(made_of.encode()).hexdigest()
    return CompiledPlaybook(name=name, trigger=trigger, steps=steps, content_hash=digest)


def on_event(event: str) -> Trigger:
    return Trigger(kind=TriggerKind.EVENT, event=event)


def on_cron(cron: str, timezone: str = "UTC") -> Trigger:
    return Trigger(kind=TriggerKind.CRON, cron=cron, timezone=timezone)


def answer_with(text: str, **output: Any) -> str:
    """A model answer ending in the declared JSON object."""
    return f"{text}\n\n{json.dumps(output)}"


def user_text(api: FakeModelAPI, index: int) -> str:
    """Every user message of the model request at `index`, as one text."""
    messages = api.requests[index].body["messages"]
    return "\n".join(str(m.get("content") or "") for m in messages if m["role"] == "user")


@dataclass
class PlaybookWorld:
    client: Client
    settings: Settings
    suffix: str

    def name(self, base: str) -> str:
        """A name unique to this test, so tests share the session's database safely."""
        return f"{base}-{self.suffix}"

    async def agent(self, base: str = "triager") -> str:
        config = AgentConfig.model_validate(
            {
                "apiVersion": "openloop.ai/v1alpha1",
                "kind": "Agent",
                "metadata": {"name": self.name(base)},
                "spec": {"model_policy": {"default": MODEL, "max_output_tokens": 256}},
            }
        )
        stored, _ = await apply_agent(await self.pool(), config)
        return stored.name

    async def pool(self) -> Any:
        return await get_pool(self.settings.require_database_url())

    async def apply(
        self,
        playbooks: Sequence[CompiledPlaybook],
        events: Sequence[EventType] = (),
        overlap: str = "skip",
        polls: Sequence[tuple[SensorPoll, float]] = (),
    ) -> ApplyResult:
        return await apply_playbooks(
            self.client,
            await self.pool(),
            playbooks,
            events,
            self.settings.task_queue,
            overlap,
            "test",
            polls,
        )

    async def finished_run(self, playbook: str) -> playbook_rows.StoredRun:
        """The playbook's only run, once it has finished."""
        [run] = await self.finished_runs(playbook, 1)
        return run

    async def finished_runs(
        self, playbook: str, count: int, within: float = 60.0
    ) -> list[playbook_rows.StoredRun]:
        """The playbook's `count` runs (never more), newest first, once all have finished."""
        async with asyncio.timeout(within):
            while True:
                runs = await playbook_rows.list_runs(await self.pool(), playbook)
                if len(runs) > count:
                    raise AssertionError(f"{len(runs)} runs of {playbook}: {[r.record.run_id for r in runs]}")
                if len(runs) == count and all(r.record.status is not PlaybookRunStatus.RUNNING for r in runs):
                    return runs
                await asyncio.sleep(0.2)


@asynccontextmanager
async def playbook_world(client: Client, pg_url: str, tmp_path: Any) -> AsyncIterator[PlaybookWorld]:
    suffix = uuid.uuid4().hex[:8]
    settings = Settings(database_url=pg_url, state_dir=tmp_path / "state", task_queue=f"tq-{suffix}")
    async with build_worker(client, settings):
        yield PlaybookWorld(client, settings, suffix)


async def one_step(world: PlaybookWorld, base: str, event: EventType, instructions: str) -> str:
    """Apply a one-step playbook on `event`; its name."""
    agent = await world.agent()
    step = PlaybookStep(name="look", agent=agent, instructions=instructions, output=(field("summary"),))
    name = world.name(base)
    await world.apply([playbook(name, on_event(event.name), step)], [event])
    return name


def cli_env(world: PlaybookWorld, dev_server: TemporalDevServer) -> dict[str, str]:
    url = world.settings.require_database_url()
    separator = "&" if "?" in url else "?"
    return {
        "OPENLOOP_DATABASE_URL": f"{url}{separator}application_name=openloop-playbooks-cli",
        "OPENLOOP_TEMPORAL_ADDRESS": dev_server.address,
        "OPENLOOP_TASK_QUEUE": world.settings.task_queue,
        "OPENLOOP_STATE_DIR": str(world.settings.state_dir),
        "COLUMNS": "200",
    }
