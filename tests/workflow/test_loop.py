"""Loop completion: cut-off answers are continued, long conversations are summarised, follow-ups
join a task that asked a question, and every stop carries a reason and a next action."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import agent_yaml, start, task_input, worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import TaskStatus, UserMessage


async def test_an_answer_cut_off_by_the_output_limit_is_continued(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([say("The first half, ", finish="length"), say("and the second half.")])
    async with worker(ts_env, script, task_queue):
        result = await (await start(ts_env, task_input(agent_yaml()), task_queue)).result()
    assert result.status == TaskStatus.SUCCESS
    assert result.reply == "The first half, and the second half."
    assert script.model_inputs[1].new_messages[-1].content.startswith("Continue")


async def test_continuations_stop_after_three(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    script = Script([], default=lambda inp: say("more ", finish="length"))
    async with worker(ts_env, script, task_queue):
        result = await (await start(ts_env, task_input(agent_yaml()), task_queue)).result()
    assert result.status == TaskStatus.SUCCESS
    assert len(script.model_inputs) == 4  # the first answer and three continuations
    assert result.reply == ("more " * 4).strip()


async def test_a_prompt_past_the_context_share_is_summarised_first(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    yaml_text = agent_yaml().replace(
        "max_output_tokens: 500}", "max_output_tokens: 500, context_window: 1000}"
    )
    script = Script(
        [
            use("memory.search", '{"query": "a"}', "c1", tokens=(700, 20)),
            say("Summary of what happened."),
            say("Done."),
        ]
    )
    async with worker(ts_env, script, task_queue):
        result = await (await start(ts_env, task_input(yaml_text), task_queue)).result()
    assert result.status == TaskStatus.SUCCESS and result.reply == "Done."
    purposes = [i.purpose for i in script.model_inputs]
    assert purposes == ["step", "summary", "step"]
    summary_call, next_call = script.model_inputs[1], script.model_inputs[2]
    assert summary_call.offered_tools == []
    # The step after the summary builds its prompt from the summary onwards.
    assert next_call.view.summary_upto == next_call.transcript_upto > 0


async def test_a_question_waits_for_the_follow_up_in_the_same_task(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([say("Open a GitHub issue to track it?"), say("Opening it now.")])
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml()), task_queue)
        for _ in range(100):
            if (await handle.query(AgentTaskWorkflow.status)).status == TaskStatus.WAITING_USER:
                break
            await asyncio.sleep(0.05)
        await handle.signal(AgentTaskWorkflow.user_message, UserMessage("U_BOB", "yes please"))
        result = await handle.result()
    assert result.status == TaskStatus.SUCCESS and result.reply == "Opening it now."
    assert [r.status for r in script.replies][0] == TaskStatus.WAITING_USER
    assert script.model_inputs[1].new_messages[-1].content == "U_BOB: yes please"


async def test_an_unanswered_question_ends_the_task_after_the_follow_up_window(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([say("Which repository?")])
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml()), task_queue)
        await ts_env.sleep(timedelta(hours=1, minutes=1))
        result = await handle.result()
    assert result.status == TaskStatus.SUCCESS
    assert result.reply == "Which repository?"
    assert result.next_action  # every stop says what to do next


async def test_explain_gives_the_decision_chain(ts_env: WorkflowEnvironment, task_queue: str) -> None:
    script = Script([use("memory.search", '{"query": "x"}', "c1"), say("Found it.")])
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, task_input(agent_yaml()), task_queue)
        await handle.result()
        explanation = await handle.query(AgentTaskWorkflow.explain)
    kinds = [s.kind for s in explanation.steps]
    assert kinds[:3] == ["recall", "model", "tool"] and kinds[-1] == "model"
    assert explanation.decisions[0].startswith("started for U_BOB")
    assert explanation.decisions[-1] == "stopped: SUCCESS: answered"
    assert explanation.status == TaskStatus.SUCCESS and explanation.next_action
