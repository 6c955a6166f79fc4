"""Read-only local tools (memory.search) run inside the next model call instead of as their own
activity: one round trip per step, with the same checks, records and stop rules as before."""

from __future__ import annotations

import json

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import (
    DEPLOYS,
    agent_yaml,
    start,
    task_input,
    two_searches_then,
    worker,
)
from workflows import policy
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ActivityName, TaskStatus


def key(query: str) -> str:
    """The key of a step's first memory.search call with this query."""
    return policy.call_key(0, "memory.search", {"query": query})


async def test_a_search_runs_inside_the_next_model_call_and_is_recorded_as_its_step(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = two_searches_then("Tuesdays; roll back with the runbook.")
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml()), task_queue)
        result = await handle.result()
        explanation = await handle.query(AgentTaskWorkflow.explain)
        history = await handle.fetch_history()
    assert result.status == TaskStatus.SUCCESS and result.steps == 3

    # Each search ran once, keyed by the step that asked for it, inside the following call.
    # Keys come from the call's position and arguments, never the provider's call id.
    assert [(c.step, c.call_id, c.arguments) for c in script.tool_calls] == [
        (1, key("deploys"), {"query": "deploys"}),
        (2, key("rollbacks"), {"query": "rollbacks"}),
    ]
    assert [c.idempotency_key for c in script.tool_calls] == [
        f"{result.task_id}:1:{key('deploys')}",
        f"{result.task_id}:2:{key('rollbacks')}",
    ]
    first, second, third = script.model_inputs
    assert first.fold is None
    assert [c.call_id for c in second.folded_calls] == [key("deploys")]
    assert [c.call_id for c in third.folded_calls] == [key("rollbacks")]
    assert second.new_messages == [] and third.new_messages == []  # the results went in directly

    # No tool activity of its own: the only local activities are the start note, the recall and
    # the task's constants.
    local = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
    ]
    assert len(local) == 3
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert ActivityName.RUN_TOOL not in scheduled
    # The timeline still reads model, tool, model, tool, model with the tools at their steps.
    timeline = [(s.step, s.kind) for s in explanation.steps if s.kind in ("model", "tool")]
    assert timeline == [(1, "model"), (1, "tool"), (2, "model"), (2, "tool"), (3, "model")]


async def test_a_repeat_that_could_end_the_task_runs_before_another_model_call(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=lambda inp: use("memory.search", DEPLOYS, f"c{inp.step}"))
    async with worker(ts_env, script, task_queue):
        result = await (await start(ts_env, task_input(agent_yaml()), task_queue)).result()
    assert result.status == TaskStatus.NO_PROGRESS
    # Three searches and three model calls, as without folding: the third search would complete
    # the streak, so it runs on its own and the task stops without asking the model again.
    assert len(script.tool_calls) == 3 and len(script.model_inputs) == 3
    assert script.model_inputs[2].fold is not None


async def test_writes_and_steps_with_a_remote_tool_run_as_their_own_activities(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    yaml_text = agent_yaml().replace(
        "    - {name: memory.search, permissions: [memory:read]}",
        "    - {name: memory.search, permissions: [memory:read]}\n"
        "    - {name: memory.save, permissions: [memory:write]}",
    )
    two_calls = use("github.get_issue", json.dumps({"repo": "acme/app", "number": 7}), "c2")
    two_calls.tool_calls.insert(0, use("memory.search", DEPLOYS, "c1").tool_calls[0])
    script = Script(
        [
            use("memory.save", json.dumps({"content": "we deploy on Tuesdays"}), "c0"),
            two_calls,
            say("Saved, and issue 7 is about deploys."),
        ]
    )
    async with worker(ts_env, script, task_queue):
        result = await (await start(ts_env, task_input(yaml_text), task_queue)).result()
    assert result.status == TaskStatus.SUCCESS
    assert [c.tool for c in script.tool_calls] == ["memory.save", "memory.search", "github.get_issue"]
    # Nothing rode along with a model call; each result reached the model as a new message.
    assert all(inp.fold is None for inp in script.model_inputs)
    assert [m.tool_call_id for m in script.model_inputs[2].new_messages] == ["c1", "c2"]


async def test_a_search_queued_at_continue_as_new_runs_in_the_next_run(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = two_searches_then("Done.")
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml(), max_steps_per_run=1), task_queue)
        result = await handle.result()
        explanation = await handle.query(AgentTaskWorkflow.explain)
    assert result.status == TaskStatus.SUCCESS and result.reply == "Done."
    assert sum("continuing as new" in d for d in explanation.decisions) == 2
    assert [c.call_id for c in script.tool_calls] == [key("deploys"), key("rollbacks")]  # each once, in order
    assert [i.fold[0].call_id if i.fold else None for i in script.model_inputs] == [
        None,
        key("deploys"),
        key("rollbacks"),
    ]
