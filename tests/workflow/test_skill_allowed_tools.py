"""A loaded skill's `allowed-tools` on the time-skipping server: from then on the model is
offered only the tools the skill allows that the agent had (never one it lacks), in later
runs and in subagents too; a call to a tool taken away does not run."""

from __future__ import annotations

import json

from temporalio.testing import WorkflowEnvironment

from tests.workflow.delegation_env import is_child
from tests.workflow.scripted import Script, say, use
from tests.workflow.skill_env import ISSUE, LOG, task
from tests.workflow.task_env import start, worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SkillRef, TaskStatus


async def test_a_loaded_skill_narrows_the_tools_for_the_rest_of_the_task(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script(
        [
            use("skill.load", json.dumps({"name": "thread-summary"}), "c0"),  # no allowed-tools
            use("skill.load", json.dumps({"name": "ci-triage"}), "c1"),
            use("github.create_issue", ISSUE, "c2"),  # taken away: refused, never run
            use("github.get_job_log", LOG, "c3"),
            say("The job ran out of memory."),
        ]
    )
    inp = task(max_steps_per_run=2)  # later runs start from the narrowed specs
    async with worker(ts_env, script, task_queue):
        handle = await start(ts_env, inp, task_queue)
        result = await handle.result()
        explained = await handle.query(AgentTaskWorkflow.explain)
    assert result.status == TaskStatus.SUCCESS and result.reply == "The job ran out of memory."
    everything = {"github.get_job_log", "github.create_issue", "memory.search", "agent.delegate"}
    offered = [set(inp.offered_tools) for inp in script.model_inputs]
    assert everything | {"skill.load", "skill.read"} == offered[0] == offered[1]  # before ci-triage
    narrowed = {"github.get_job_log", "skill.load", "skill.read"}
    assert offered[2:] == [narrowed] * 3  # never slack.post_message, which the agent lacks
    assert [call.tool for call in script.tool_calls] == ["github.get_job_log"]
    told = script.model_inputs[3].new_messages[0].content
    assert "the allowed-tools of the loaded skill ci-triage excludes it" in told
    assert any(
        decision.startswith("skill ci-triage allows only github.get_job_log, slack.post_message: ")
        and decision.endswith("no longer offered github.create_issue, memory.search, agent.delegate")
        for decision in explained.decisions
    ), explained.decisions


async def test_a_subagent_started_after_a_skill_narrowed_the_tools_gets_no_more(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The skill keeps agent.delegate here, so the parent can still delegate: its child is
    offered the narrowed tools, less delegation."""
    keeps_delegate = SkillRef("ci-triage", 3, "e" * 64, "Triage", ("github.get_job_log", "agent.delegate"))
    children: list[set[str]] = []

    def child_answers(inp):  # type: ignore[no-untyped-def]
        children.append(set(inp.offered_tools))
        return say("Child done.")

    script = Script(
        [
            use("skill.load", json.dumps({"name": "ci-triage"}), "c1"),
            use("agent.delegate", json.dumps({"task": "read the job log"}), "c2"),
        ],
        default=lambda inp: child_answers(inp) if is_child(inp.task_id) else say("Parent done."),
    )
    async with worker(ts_env, script, task_queue):
        result = await (await start(ts_env, task(skills=[keeps_delegate]), task_queue)).result()
    assert result.status == TaskStatus.SUCCESS and result.reply == "Parent done."
    assert children == [{"github.get_job_log", "skill.load", "skill.read"}]
