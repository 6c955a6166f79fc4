"""Per-task ceilings, loop guards and stop reasons, on the time-skipping server."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import agent_yaml, issue_script, pending_request, start, task_input, worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import BudgetExtension, ModelCallInput, ModelCallResult, TaskStatus


def searching(inp: ModelCallInput) -> ModelCallResult:
    """Always another search, each with new arguments (so it is not a no-progress repeat)."""
    return use("memory.search", json.dumps({"query": f"q{inp.step}"}), call_id=f"c{inp.step}")


async def test_token_ceiling_clamps_max_tokens_and_stops(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script(
        [],
        default=lambda inp: use(
            "memory.search",
            json.dumps({"query": f"q{inp.step}"}),
            call_id=f"c{inp.step}",
            tokens=(600, 100),
        ),
    )
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml(tokens=1000)), task_queue)
        await ts_env.sleep(timedelta(hours=1, minutes=1))
        result = await handle.result()
    assert result.status == TaskStatus.BUDGET_EXHAUSTED
    assert "tokens" in result.reason
    first, second = script.model_inputs[0], script.model_inputs[1]
    assert first.max_tokens == 500  # the model policy's output cap
    assert second.max_tokens == 300 and second.token_headroom == 300  # 1000 - 700 used
    assert len(script.model_inputs) == 2  # 1400 used: no third call


async def test_usd_ceiling_pauses_and_an_approver_extension_resumes(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    answers = [
        use("memory.search", '{"query": "a"}', "c1", cost=0.006),
        use("memory.search", '{"query": "b"}', "c2", cost=0.006),
        say("All done.", cost=0.001),
    ]
    script = Script(answers)
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml(usd=0.01)), task_queue)
        for _ in range(100):
            if (await handle.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_BUDGET:
                break
            await asyncio.sleep(0.05)
        assert script.model_inputs[1].usd_headroom == 0.004
        await handle.signal(AgentTaskWorkflow.extend_budget, BudgetExtension(by="U_MALLORY", usd=1.0))
        await asyncio.sleep(0.2)
        assert (await handle.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_BUDGET
        await handle.signal(AgentTaskWorkflow.extend_budget, BudgetExtension(by="U_ALICE", usd=0.5))
        result = await handle.result()
    assert result.status == TaskStatus.SUCCESS
    assert result.reply == "All done."
    assert any(r.status == TaskStatus.BUDGET_EXHAUSTED for r in script.replies)  # told the thread


async def test_iterations_run_out_then_a_final_call_without_tools_summarises(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script(
        [],
        default=lambda inp: searching(inp) if inp.offered_tools else say("Summary: searched three times."),
    )
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml(iterations=3)), task_queue)
        await ts_env.sleep(timedelta(hours=1, minutes=1))
        result = await handle.result()
    assert result.status == TaskStatus.BUDGET_EXHAUSTED
    assert "iterations" in result.reason
    assert [bool(i.offered_tools) for i in script.model_inputs] == [True, True, True, False]
    assert result.reply.startswith("Summary: searched three times.")
    # Near the limit the model was told to wrap up.
    assert any("wrap up" in m.content for i in script.model_inputs for m in i.new_messages)


async def test_wall_clock_ceiling_stops_the_task(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    script = Script([], default=searching, tool_delay_seconds=1.1)
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml(wall="2s")), task_queue)
        result = await handle.result()
    assert result.status == TaskStatus.BUDGET_EXHAUSTED
    assert "wall-clock" in result.reason
    assert 2 <= len(script.tool_calls) <= 3


async def test_same_call_same_result_three_times_is_no_progress(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([], default=lambda inp: use("memory.search", '{"query": "same"}', f"c{inp.step}"))
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml()), task_queue)
        result = await handle.result()
    assert result.status == TaskStatus.NO_PROGRESS
    assert len(script.tool_calls) == 3


async def test_three_invalid_tool_calls_in_a_row_end_the_task(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    bad = [
        use("memory.search", "{not json", "c1"),
        use("memory.search", '{"k": 3}', "c2"),
        use("memory.search", '{"query": 7}', "c3"),
    ]
    script = Script(bad)
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml()), task_queue)
        result = await handle.result()
    assert result.status == TaskStatus.ERROR
    assert "invalid tool calls" in result.reason
    assert script.tool_calls == []
    errors = [m.content for i in script.model_inputs[1:] for m in i.new_messages if m.role == "tool"]
    assert "not valid JSON" in errors[0] and "'query' is a required property" in errors[1]


async def test_tools_outside_the_config_are_refused_audited_and_never_run(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script(
        [
            use("github.create_issue", '{"repo": "a/b", "title": "x"}', "c1"),
            use("shell.exec", '{"cmd": "rm -rf /"}', "c2"),
            say("I cannot do that."),
        ]
    )
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml()), task_queue)
        result = await handle.result()
    assert result.status == TaskStatus.SUCCESS
    assert script.tool_calls == []
    refused = [a for a in script.audits if a.kind == "tool_refused"]
    assert [a.tool for a in refused] == ["github.create_issue", "shell.exec"]


async def test_cancel_signal_stops_a_task_waiting_for_approval(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    from workflows.types import CancelRequest

    script = issue_script()
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(), task_queue)
        await pending_request(handle)
        await handle.signal(AgentTaskWorkflow.cancel, CancelRequest(by="U_BOB", reason="not needed"))
        result = await handle.result()
    assert result.status == TaskStatus.CANCELLED
    assert script.tool_calls == []
    assert script.resolutions[-1].outcome == "cancelled"
