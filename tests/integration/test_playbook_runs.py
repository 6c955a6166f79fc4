"""Playbook runs on the real dev server and Postgres, each step a child agent task answered by
the scripted model API: a cron playbook's schedule fires and runs its steps in order with the
outputs passed along (each declared output asked for in the provider's structured mode); an
answer that does not validate twice fails the run with the reason; applying a changed cron
updates the schedule and removing the playbook deletes it; an emitted event starts the
playbook listening for it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, ScheduleActionStartWorkflow
from temporalio.service import RPCError

from activities.playbooks.schedules import schedule_id
from activities.playbooks.starts import start_listening
from activities.store import playbooks as playbook_rows
from tests.fakes.model_api import FakeModelAPI
from tests.integration.playbook_env import (
    answer_with,
    field,
    on_cron,
    on_event,
    playbook,
    playbook_world,
    user_text,
)
from workflows import search
from workflows.playbook_calls import MAX_EMIT_DEPTH
from workflows.playbook_types import FieldKind, PlaybookRunStatus, PlaybookStep, StepStatus

VERDICT = field("verdict", FieldKind.ENUM, "flaky", "real")


async def test_a_cron_playbooks_schedule_fires_and_runs_its_steps_in_order_with_outputs_passed_along(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    api.answer(answer_with("Two critical advisories.", count=2, worst="CVE-2024-0001"))
    api.answer(answer_with("Opened the issue text.", title="Critical: CVE-2024-0001"))
    async with playbook_world(client, pg_url, tmp_path) as world:
        agent = await world.agent()
        name = world.name("nightly-deps")
        scan = PlaybookStep(
            name="scan",
            agent=agent,
            instructions="It is {{ event.scheduled_at }}. Count the critical advisories of the dependencies.",
            output=(field("count", FieldKind.INT), field("worst")),
            budget_usd=0.5,
        )
        report = PlaybookStep(
            name="report",
            agent=agent,
            instructions="There are {{ scan.count }} critical advisories; the worst: {{ steps.scan.worst }}.",
            after=("scan",),
            output=(field("title"),),
        )
        applied = await world.apply([playbook(name, on_cron("0 3 * * *", "Europe/Berlin"), scan, report)])
        assert applied.stored.created == [f"{name} v1"] and applied.schedules.created == [name]
        handle = client.get_schedule_handle(schedule_id(name))
        await handle.trigger()
        run = await world.finished_run(name)
        described = await client.get_workflow_handle(run.record.run_id).describe()
        api.answer(answer_with("None today.", count=0, worst="none"))
        api.answer(answer_with("Nothing to open.", title="No critical advisories"))
        # The schedule learns of the first run's end on its own time; triggered before that,
        # its overlap policy (skip) would skip the second run.
        async with asyncio.timeout(30):
            for _ in range(150):
                if not (await handle.describe()).info.running_actions:
                    break
                await asyncio.sleep(0.2)
        # A schedule names each run by its firing time to the second: a second firing within
        # the same second would find the first run's id taken.
        await asyncio.sleep(1.1)
        await handle.trigger()
        try:
            later = (await world.finished_runs(name, 2, within=120))[0].record
        except TimeoutError:
            recent = (await handle.describe()).info.recent_actions
            runs = [r.record for r in await playbook_rows.list_runs(await world.pool(), name)]
            raise AssertionError(f"no second run: schedule's recent actions {recent}; runs {runs}") from None
    assert later.status is PlaybookRunStatus.SUCCEEDED, later.reason
    assert later.event == {"scheduled_at": later.run_key, "last_run": run.record.run_key}
    record = run.record
    assert record.status is PlaybookRunStatus.SUCCEEDED, record.reason
    assert record.event_name == "cron" and record.version == 1
    assert record.run_id.startswith(f"playbook-{name}-cron-")
    assert record.run_key[:4].isdigit()  # the schedule's time, not the placeholder
    assert record.event == {"scheduled_at": record.run_key}  # the first run: no last_run
    first, second = record.steps
    assert (first.name, first.status, first.output) == (
        "scan",
        StepStatus.SUCCEEDED,
        {"count": 2, "worst": "CVE-2024-0001"},
    )
    assert (second.name, second.status, second.output) == (
        "report",
        StepStatus.SUCCEEDED,
        {"title": "Critical: CVE-2024-0001"},
    )
    assert first.task_id == f"{record.run_id}.scan" and first.cost_usd > 0 and first.tokens == 18
    assert record.cost_usd == pytest.approx(first.cost_usd + second.cost_usd)
    # In order: the second request carried the first step's output, fenced as data.
    assert len(api.requests) == 4
    assert f'<untrusted-data source="event.scheduled_at">\n{record.run_key}\n' in user_text(api, 0)
    assert "Count the critical advisories" in user_text(api, 0) and '"count": int' in user_text(api, 0)
    # ...and asked of the provider in its structured-output mode (the model has one).
    schema = api.requests[0].response_format()["json_schema"]["schema"]
    assert schema["properties"] == {"count": {"type": "integer"}, "worst": {"type": "string"}}
    assert schema["required"] == ["count", "worst"] and schema["additionalProperties"] is False
    asked = user_text(api, 1)
    assert '<untrusted-data source="step.scan.count">\n2\n</untrusted-data>' in asked
    assert '<untrusted-data source="step.scan.worst">\nCVE-2024-0001\n</untrusted-data>' in asked
    assert described.typed_search_attributes.get(search.PLAYBOOK) == name


async def test_an_answer_that_does_not_validate_twice_fails_the_run_with_the_reason(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
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
            output=(VERDICT,),
        )
        propose = PlaybookStep(name="propose", agent=agent, instructions="Propose.", after=("investigate",))
        await world.apply([playbook(name, on_event(world.name("CIFailed")), investigate, propose)])
        started = await start_listening(
            client, await world.pool(), world.settings.task_queue, world.name("CIFailed"),
            {"repo": "acme/api"}, "delivery-1",
        )  # fmt: skip
        run = await world.finished_run(name)

    assert len(started.started) == 1
    record = run.record
    assert record.status is PlaybookRunStatus.FAILED
    first, second = record.steps
    assert first.status is StepStatus.FAILED and first.attempts == 2
    assert first.reason == (
        "the answer did not have the declared output twice: the answer does not end with a JSON object"
    )
    assert record.reason == f"step investigate failed: {first.reason}"
    assert second.status is StepStatus.SKIPPED and second.reason == "upstream step investigate failed"
    # Asked again once, with the first answer and what was wrong with it.
    assert len(api.requests) == 2
    again = user_text(api, 1)
    assert "'verdict' must be one of flaky, real, not \"maybe\"" in again
    assert "Looks flaky." in again


async def test_applying_a_changed_cron_updates_the_schedule_and_removing_the_playbook_deletes_it(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    async with playbook_world(client, pg_url, tmp_path) as world:
        agent = await world.agent()
        name = world.name("nightly")
        step = PlaybookStep(name="scan", agent=agent, instructions="Scan.")
        first = await world.apply([playbook(name, on_cron("0 3 * * *"), step)])
        again = await world.apply([playbook(name, on_cron("0 3 * * *"), step)])
        handle = client.get_schedule_handle(schedule_id(name))
        await handle.pause(note="held by an operator")
        changed = await world.apply([playbook(name, on_cron("30 4 * * 1-5", "Europe/Berlin"), step)])
        described = await handle.describe()
        removed = await world.apply([])
        with pytest.raises(RPCError):
            await handle.describe()
        back = await world.apply([playbook(name, on_cron("0 3 * * *"), step)])
        versions = await playbook_rows.latest_playbooks(await world.pool(), with_retired=True)

    assert (first.schedules.created, again.schedules.unchanged) == ([name], [name])
    assert again.stored.unchanged == [f"{name} v1"] and changed.stored.created == [f"{name} v2"]
    assert changed.schedules.updated == [name]
    spec = described.schedule.spec
    assert spec.time_zone_name == "Europe/Berlin"
    calendar = spec.calendars[0] if spec.calendars else None
    assert spec.cron_expressions == ["30 4 * * 1-5"] or (
        calendar is not None
        and [r.start for r in calendar.hour] == [4]
        and [r.start for r in calendar.minute] == [30]
    )
    assert described.schedule.state.paused and described.schedule.state.note == "held by an operator"
    assert isinstance(described.schedule.action, ScheduleActionStartWorkflow)
    assert removed.schedules.deleted == [name] and removed.stored.retired == [name]
    assert back.schedules.created == [name] and back.stored.created == [f"{name} v3"]
    assert [p.version for p in versions if p.name == name] == [3]


async def test_an_emitted_event_starts_the_playbook_listening_for_it(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    api.answer(answer_with("A real failure.", verdict="real"))
    api.answer("Paged the owner.")
    async with playbook_world(client, pg_url, tmp_path) as world:
        agent = await world.agent()
        triaged = world.name("Triaged")
        triage = PlaybookStep(
            name="triage", agent=agent, instructions="Triage it.", output=(VERDICT,), emits=triaged
        )
        page = PlaybookStep(
            name="page", agent=agent, instructions="The verdict is {{ event.verdict }}; page."
        )
        first, second = world.name("triage"), world.name("page")
        await world.apply(
            [
                playbook(first, on_event(world.name("CIFailed")), triage),
                playbook(second, on_event(triaged), page),
            ]
        )
        await start_listening(
            client, await world.pool(), world.settings.task_queue, world.name("CIFailed"), {}, "d-7"
        )
        upstream = await world.finished_run(first)
        downstream = await world.finished_run(second)

    assert upstream.record.status is PlaybookRunStatus.SUCCEEDED, upstream.record.reason
    assert downstream.record.status is PlaybookRunStatus.SUCCEEDED, downstream.record.reason
    assert downstream.record.event == {"verdict": "real"} and downstream.record.depth == 1
    assert downstream.record.run_key == f"{upstream.record.run_id}.triage"
    assert upstream.record.steps[0].reason == f"emitted {triaged}: {downstream.record.run_id}"
    assert '<untrusted-data source="event.verdict">\nreal\n</untrusted-data>' in user_text(api, 1)


async def test_independent_steps_run_in_parallel_and_a_join_gets_both_outputs(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    api.answer(answer_with("Read the logs.", notes="timeout in test_io"))
    for _ in range(2):  # the two branches, in whichever order they ask
        api.answer(answer_with("Checked.", finding="ok"), delay=0.5)
    api.answer(answer_with("Joined.", finding="both ok"))
    async with playbook_world(client, pg_url, tmp_path) as world:
        agent = await world.agent()
        finding = (field("finding"),)
        steps = (
            PlaybookStep(name="read", agent=agent, instructions="Read.", output=(field("notes"),)),
            PlaybookStep(name="left", agent=agent, instructions="Left.", after=("read",), output=finding),
            PlaybookStep(name="right", agent=agent, instructions="Right.", after=("read",), output=finding),
            PlaybookStep(
                name="join", agent=agent, after=("left", "right"), output=finding,
                instructions="{{ left.finding }} and {{ right.finding }} after {{ read.notes }}",
            ),
        )  # fmt: skip
        name = world.name("diamond")
        await world.apply([playbook(name, on_event(world.name("Go")), *steps)])
        started = await start_listening(
            client, await world.pool(), world.settings.task_queue, world.name("Go"), {}, "k"
        )
        run = await world.finished_run(name)
        history = await client.get_workflow_handle(started.started[0]).fetch_history()

    assert run.record.status is PlaybookRunStatus.SUCCEEDED, run.record.reason
    # Both branches were started before either finished.
    run_id = run.record.run_id
    started_kind = EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    done_kind = EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED
    order = [
        (event.event_type, event.start_child_workflow_execution_initiated_event_attributes.workflow_id)
        if event.event_type == started_kind
        else (
            event.event_type,
            event.child_workflow_execution_completed_event_attributes.workflow_execution.workflow_id,
        )
        for event in history.events
        if event.event_type in (started_kind, done_kind)
    ]
    started_ids = [wid for kind, wid in order if kind == started_kind]
    branches = {f"{run_id}.left", f"{run_id}.right"}
    assert started_ids[0] == f"{run_id}.read" and started_ids[3] == f"{run_id}.join"
    assert set(started_ids[1:3]) == branches  # in whichever order their agents were looked up
    first_branch_done = next(
        i for i, (kind, wid) in enumerate(order) if kind == done_kind and wid in branches
    )
    assert max(order.index((started_kind, branch)) for branch in branches) < first_branch_done
    joined = user_text(api, 3)
    assert '<untrusted-data source="step.left.finding">\nok\n' in joined
    assert '<untrusted-data source="step.read.notes">\ntimeout in test_io\n' in joined


async def test_an_event_chain_stops_at_the_depth_limit_and_an_unknown_agent_fails_its_step(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    for _ in range(MAX_EMIT_DEPTH + 1):
        api.answer(answer_with("Again.", verdict="real"))
    async with playbook_world(client, pg_url, tmp_path) as world:
        agent = await world.agent()
        echo = world.name("Echo")
        step = PlaybookStep(name="echo", agent=agent, instructions="Echo.", output=(VERDICT,), emits=echo)
        name = world.name("echo")
        ghost = PlaybookStep(name="ghost", agent=world.name("nobody"), instructions="Boo.")
        await world.apply(
            [playbook(name, on_event(echo), step), playbook(world.name("ghost"), on_event("G"), ghost)]
        )
        await start_listening(client, await world.pool(), world.settings.task_queue, echo, {}, "first")
        await start_listening(client, await world.pool(), world.settings.task_queue, "G", {}, "g1")
        runs = await world.finished_runs(name, MAX_EMIT_DEPTH + 1)
        haunted = await world.finished_run(world.name("ghost"))

    assert sorted(run.record.depth for run in runs) == list(range(MAX_EMIT_DEPTH + 1))
    deepest = next(run for run in runs if run.record.depth == MAX_EMIT_DEPTH).record
    assert deepest.status is PlaybookRunStatus.SUCCEEDED
    assert deepest.steps[0].reason == (
        f"did not emit {echo}: runs started by emitted events stop at depth {MAX_EMIT_DEPTH}"
    )
    assert len(api.requests) == MAX_EMIT_DEPTH + 1
    step = haunted.record.steps[0]
    assert haunted.record.status is PlaybookRunStatus.FAILED and step.status is StepStatus.FAILED
    assert f"no agent '{world.name('nobody')}' is applied" in step.reason
