"""The playbook run workflow's activities: store its record, look a step's agent up, and
publish an emitted event.

Thin: one input, one output, the work in `activities.store.playbooks` and
`activities.playbooks.starts`. Publishing starts runs with ids derived from the emitting run
and step, so a retried publish starts nothing twice.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.playbooks.sensor_polls import poll_sensor
from activities.playbooks.starts import start_listening
from activities.runtime import runtime
from activities.store import playbooks as playbook_rows
from activities.store.agents import get_agent
from activities.store.skills import latest_skills
from activities.tools.catalog import specs_for, writes_of
from workflows.delegate_tool import TeammateStart
from workflows.errors import ErrorType
from workflows.playbook_calls import (
    CRON_EVENT,
    MAX_EMIT_DEPTH,
    MAX_RUNS_PER_EVENT,
    AgentLookup,
    PlaybookActivity,
    Published,
    PublishEvent,
    Recorded,
    RunRecord,
)


@activity.defn(name=PlaybookActivity.RECORD)
async def record_playbook_run(record: RunRecord) -> Recorded:
    pool = await runtime().pool()
    await playbook_rows.record_run(pool, record)
    if record.seq == 1 and record.event_name == CRON_EVENT:
        return Recorded(last_run=await playbook_rows.last_cron_run(pool, record.playbook, record.run_id))
    return Recorded()


@activity.defn(name=PlaybookActivity.AGENT)
async def playbook_agent(lookup: AgentLookup) -> TeammateStart:
    """What a step's child task starts with: its agent's latest applied version, tools, skills;
    refused when the step follows the agent's approvals and they leave a write ungated."""
    pool = await runtime().pool()
    stored = await get_agent(pool, lookup.agent)
    if stored is None:
        raise ApplicationError(
            f"no agent {lookup.agent!r} is applied: openloop agents apply it, then run the playbook again",
            type=ErrorType.TOOL_CONFIG_ERROR,
            non_retryable=True,
        )
    ungated = writes_of(stored.config).ungated
    if lookup.approval != "required" and ungated:
        # Checked when the step starts, not only at apply: the agent may have been re-applied
        # since with fewer approvals, and a playbook must not run its writes ungated.
        raise ApplicationError(
            f"its applied version {stored.version} may call {', '.join(ungated)}, which write, without "
            "an approval, and the step says `approval: agent`; add `approval: required` to the step, "
            "or list them in the agent's spec.approvals.require_for and apply the agent again",
            type=ErrorType.TOOL_CONFIG_ERROR,
            non_retryable=True,
        )
    names = [ref.rsplit("/", 1)[-1] for ref in stored.config.spec.skills]
    skills = [skill.pinned for skill in await latest_skills(pool, names)]
    return TeammateStart(stored.config, stored.version, specs_for(stored.config), skills)


@activity.defn(name=PlaybookActivity.PUBLISH)
async def publish_playbook_event(event: PublishEvent) -> Published:
    if event.depth > MAX_EMIT_DEPTH:
        return Published(refused=f"runs started by emitted events stop at depth {MAX_EMIT_DEPTH}")
    started = await start_listening(
        activity.client(),
        await runtime().pool(),
        activity.info().task_queue,
        event.event_name,
        event.event,
        event.run_key,
        event.depth,
        origin=event.origin or event.source,
        source=event.source,
    )
    refused = ""
    if started.refused:
        refused = (
            f"did not start {', '.join(started.refused)}: one outside event starts at most "
            f"{MAX_RUNS_PER_EVENT} playbook runs and {event.origin or event.source} has started them "
            "all (do playbooks emit each other's events?)"
        )
        activity.logger.warning("playbook event %s from %s: %s", event.event_name, event.source, refused)
    return Published(started=started.started, duplicates=started.duplicates, refused=refused)


PLAYBOOK_ACTIVITIES = (record_playbook_run, publish_playbook_event, playbook_agent, poll_sensor)
