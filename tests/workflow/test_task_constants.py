"""What every model call of a task shares is stored once per run and left out of each call's
input (history); the scripted model reads it back as the real activity reads the row."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from tests.workflow.scripted import say
from tests.workflow.task_env import agent_yaml, start, task_input, two_searches_then, worker
from workflows.types import TaskStatus


async def test_model_calls_leave_the_stored_constants_out(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = two_searches_then("Tuesdays; roll back with the runbook.")
    script.default = lambda inp: say("Summary.")
    async with worker(ts_env, script, task_queue):
        inp = task_input(agent_yaml())
        result = await (await start(ts_env, inp, task_queue)).result()
    assert result.status == TaskStatus.SUCCESS

    stored = script.constants[inp.task_id]
    assert (stored.agent_name, stored.channel, stored.surface) == (
        inp.agent.name,
        inp.context.channel,
        inp.context.surface,
    )
    assert stored.models == inp.agent.spec.model_policy.models_for(inp.task_kind)
    assert stored.context == inp.context and stored.memory is not None
    for sent in script.model_inputs:
        encoded = sent.model_dump()
        assert "tool_names" not in encoded  # the stored tools, offered as they are
        assert encoded["model"] == stored.models[0]  # named for the Web UI
        assert set(encoded["budget"]) == {"max_tokens", "usd_headroom", "token_headroom"}
        assert sent.route == stored.models and sent.offered_tools == stored.tool_names
    # Folded searches travel as bare calls; they act where the row says.
    assert [len(sent.folded_calls) for sent in script.model_inputs] == [0, 1, 1]
    assert all(call.context == inp.context for i in script.model_inputs for call in i.folded_inputs())
