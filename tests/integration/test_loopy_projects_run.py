"""The recorded Loopy projects run as they are, on the real dev server and Postgres: `openloop
playbooks apply` applies their own skills and Capitalized agents with the playbooks, `openloop
playbooks fire` starts a run by hand (the same firing twice starts nothing new) and its steps run
on the offline model, as on a worker without the provider's key. A conditional `emits:` loops
the evaluator back only when the verdict is `fail` (scripted model)."""

from __future__ import annotations

import asyncio
import shutil
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from typer.testing import CliRunner, Result

from activities.llm import health
from activities.store import playbooks as playbook_rows
from activities.store.agents import apply_agent, get_agent
from activities.store.skills import latest_skills
from config.agent import AgentConfig
from config.playbooks.project_agents import agent_name
from surfaces.cli.main import app
from tests.fakes.model_api import FakeModelAPI
from tests.integration.playbook_env import PlaybookWorld, answer_with, cli_env, playbook_world
from workers.embedded import TemporalDevServer
from workflows.playbook_types import PlaybookRunStatus, StepStatus

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds" / "loopy"


@pytest.fixture
async def world(client: Client, pg_url: str, tmp_path: Path) -> AsyncIterator[PlaybookWorld]:
    async with playbook_world(client, pg_url, tmp_path) as value:
        yield value


@pytest.fixture
def keyless(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker without Anthropic's key: the registry's agents answer with the offline model."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    health.forget()


async def openloop(env: dict[str, str], *args: str) -> Result:
    return await asyncio.to_thread(lambda: CliRunner().invoke(app, ["playbooks", *args], env=env))


async def runs_of(
    world: PlaybookWorld, playbook: str, count: int, marker: str
) -> list[playbook_rows.StoredRun]:
    """The playbook's `count` finished runs whose event mentions `marker`, oldest first."""
    async with asyncio.timeout(90):
        while True:
            runs = [
                run
                for run in await playbook_rows.list_runs(await world.pool(), playbook)
                if marker in str(run.record.event)
            ]
            if len(runs) > count:
                raise AssertionError(f"{len(runs)} runs of {playbook}: {[r.record.run_id for r in runs]}")
            if len(runs) == count and all(r.record.status is not PlaybookRunStatus.RUNNING for r in runs):
                return sorted(runs, key=lambda r: r.started_at)
            await asyncio.sleep(0.2)


async def test_the_incidents_project_applies_fires_and_runs_on_the_offline_model(
    world: PlaybookWorld, dev_server: TemporalDevServer, tmp_path: Path, keyless: None
) -> None:
    root = tmp_path / "incidents"
    shutil.copytree(SEEDS / "incidents", root)
    env = cli_env(world, dev_server)
    marker = uuid.uuid4().hex[:8]
    fields = [
        "--field", "source=sentry", "--field", f"link=https://sentry.test/{marker}",
        "--field", "root_cause=a nil map", "--field", "proposed_goal=guard the map",
        "--field", "repro=go test",
    ]  # fmt: skip

    applied = await openloop(env, "apply", "--dir", str(root))
    fired = await openloop(env, "fire", "WorkItem", *fields)
    [run] = await runs_of(world, "resolve", 1, marker)
    again = await openloop(env, "fire", "WorkItem", *fields)
    unknown = await openloop(env, "fire", "WorkItem", "--field", "sorce=sentry")

    assert applied.exit_code == 0, applied.output
    assert "skill  triage v" in applied.output and "agent  investigator v" in applied.output
    assert (
        "registry.yml:22: agents.Investigator.skills: Investigator: no skill 'repro-authoring'"
        in applied.output
    )
    assert fired.exit_code == 0, fired.output
    assert f"started  {run.record.run_id}" in fired.output
    arbitrate = run.record.steps[0]
    assert (arbitrate.name, arbitrate.status) == ("arbitrate", StepStatus.SUCCEEDED), arbitrate.reason
    assert set(arbitrate.output) == {"goal"}
    assert again.exit_code == 0 and f"already started for this firing  {run.record.run_id}" in again.output
    assert "pass --key KEY to start new runs" in again.output
    assert unknown.exit_code == 1 and "WorkItem has no field 'sorce'" in unknown.output
    await runs_of(world, "resolve", 1, marker)  # the second firing started no run
    pool = await world.pool()
    investigator = await get_agent(pool, "investigator")
    assert investigator is not None
    policy = investigator.config.spec.model_policy
    assert (policy.default, policy.fallbacks, investigator.config.spec.skills) == (
        "anthropic/claude-sonnet-4-6",
        ["offline/demo"],
        ["triage"],
    )
    [triage] = await latest_skills(pool, ["triage"])
    assert triage.description == "triage"


async def test_the_effective_agents_chain_runs_each_step_in_order(
    world: PlaybookWorld, dev_server: TemporalDevServer, tmp_path: Path, keyless: None
) -> None:
    root = tmp_path / "effective-agents"
    shutil.copytree(SEEDS / "effective-agents", root)
    env = cli_env(world, dev_server)
    marker = uuid.uuid4().hex[:8]

    applied = await openloop(env, "apply", "--dir", str(root))
    fired = await openloop(env, "fire", "TextSubmitted", "--field", f"text=Revenue grew 4% ({marker})")
    [run] = await runs_of(world, "chaining", 1, marker)
    rekeyed = await openloop(
        env,
        "fire",
        "TextSubmitted",
        "--field",
        f"text=Revenue grew 4% ({marker})",
        "--key",
        f"again-{marker}",
    )
    runs = await runs_of(world, "chaining", 2, marker)

    assert applied.exit_code == 0, applied.output
    assert "stored  evaluator v" in applied.output or "unchanged  evaluator v" in applied.output
    assert fired.exit_code == 0, fired.output
    assert [(s.name, s.status) for s in run.record.steps] == [
        ("extract", StepStatus.SUCCEEDED),
        ("format", StepStatus.SUCCEEDED),
        ("sort", StepStatus.SUCCEEDED),
    ], [s.reason for s in run.record.steps]
    assert rekeyed.exit_code == 0 and "started  playbook-chaining-again-" in rekeyed.output
    assert len(runs) == 2


REGISTRY = """\
defaults:
  agent: {harness: {model: openai/gpt-4o-mini}}
agents:
  Writer: {}
  Judge: {}
events:
  ContentRequested: {brief: str, feedback: str}
"""
GENERATE = """\
---
on: ContentRequested
agent: Writer
output: {draft: str}
---
Write: {{ event.brief }} {{ event.feedback }}
"""
EVALUATE = """\
---
after: generate
agent: Judge
output: {verdict: enum[pass, fail], feedback: str}
emits: {event: ContentRequested, when: "verdict == fail"}
---
Grade {{ generate.draft }} for {{ event.brief }}.
"""


async def test_a_conditional_emit_loops_back_only_on_fail(
    world: PlaybookWorld, dev_server: TemporalDevServer, tmp_path: Path, api: FakeModelAPI
) -> None:
    root = tmp_path / "project"
    for name, text in {
        "registry.yml": REGISTRY,
        "workflows/evaluator/generate.md": GENERATE,
        "workflows/evaluator/evaluate.md": EVALUATE,
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    env = cli_env(world, dev_server)
    marker = uuid.uuid4().hex[:8]
    api.answer(answer_with("A draft.", draft="Dark mode is here."))
    api.answer(answer_with("Good.", verdict="pass", feedback=""))

    assert (await openloop(env, "apply", "--dir", str(root))).exit_code == 0
    passed = await openloop(
        env, "fire", "ContentRequested", "--field", f"brief=pass {marker}", "--field", "feedback="
    )
    [first] = await runs_of(world, "evaluator", 1, f"pass {marker}")
    api.answer(answer_with("A draft.", draft="Dark mode."))
    api.answer(answer_with("Too short.", verdict="fail", feedback="say where to turn it on"))
    api.answer(answer_with("A better draft.", draft="Dark mode is in Settings."))
    api.answer(answer_with("Good.", verdict="pass", feedback=""))
    failed = await openloop(
        env, "fire", "ContentRequested", "--field", f"brief=fail {marker}", "--field", "feedback="
    )
    looped, again = await runs_of(world, "evaluator", 2, f"fail {marker}")

    assert passed.exit_code == 0 and failed.exit_code == 0, passed.output + failed.output
    assert first.record.steps[1].reason == "did not emit ContentRequested: verdict == fail does not hold"
    assert looped.record.steps[1].output["verdict"] == "fail"
    assert looped.record.steps[1].reason == f"emitted ContentRequested: {again.record.run_id}"
    assert again.record.depth == 1
    # The brief is carried over from the run's event; the feedback is the judge's.
    assert again.record.event["brief"] == f"fail {marker}"
    assert again.record.event["feedback"] == "say where to turn it on"
    assert again.record.steps[1].reason == "did not emit ContentRequested: verdict == fail does not hold"
    assert all(r.record.status is PlaybookRunStatus.SUCCEEDED for r in (first, looped, again))


async def test_an_agent_applied_some_other_way_is_never_replaced_by_a_registrys(
    world: PlaybookWorld, dev_server: TemporalDevServer, tmp_path: Path
) -> None:
    written = "Taken" + uuid.uuid4().hex[:6].upper()
    taken = AgentConfig.model_validate(
        {"apiVersion": "openloop.ai/v1alpha1", "kind": "Agent", "metadata": {"name": agent_name(written)}}
    )
    await apply_agent(await world.pool(), taken)
    root = tmp_path / "project"
    (root / "workflows" / "evaluator").mkdir(parents=True)
    (root / "registry.yml").write_text(REGISTRY.replace("Judge: {}", f"{written}: {{}}"))
    (root / "workflows/evaluator/generate.md").write_text(GENERATE)
    (root / "workflows/evaluator/evaluate.md").write_text(
        EVALUATE.replace("agent: Judge", f"agent: {written}")
    )

    applied = await openloop(cli_env(world, dev_server), "apply", "--dir", str(root))

    assert applied.exit_code == 1
    assert (
        f"nothing applied: agent(s) {agent_name(written)} exist and were not made from a registry"
        in applied.output
    )
    stored = await get_agent(await world.pool(), agent_name(written))
    assert stored is not None and stored.version == 1 and stored.config.metadata.description == ""
