"""A call to a tool a loaded skill's `allowed-tools` took away is refused with why: the skill
excludes it, and the tools the task still has; it is audited as refused and never runs. A
tool the task never had is still unknown."""

from __future__ import annotations

import json

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.workflow.scripted import Script, say, use
from tests.workflow.skill_env import ISSUE, LOG, task
from tests.workflow.task_env import start, worker
from workflows.types import TaskStatus


@pytest.mark.parametrize("runs", ["one run", "a later run"])
async def test_a_tool_the_loaded_skill_took_away_is_refused_naming_the_skill_and_what_is_left(
    ts_env: WorkflowEnvironment, task_queue: str, runs: str
) -> None:
    script = Script(
        [
            use("skill.load", json.dumps({"name": "thread-summary"}), "c0"),  # no allowed-tools
            use("skill.load", json.dumps({"name": "ci-triage"}), "c1"),
            use("github.create_issue", ISSUE, "c2"),  # taken away by ci-triage
            use("slack.post_message", json.dumps({"text": "hi"}), "c3"),  # the agent never had it
            use("github.get_job_log", LOG, "c4"),
            say("The job ran out of memory."),
        ]
    )
    async with worker(ts_env, script, task_queue):
        # In a later run the task starts from the narrowed specs: the refusal still says why.
        inp = task(max_steps_per_run=2) if runs == "a later run" else task()
        result = await (await start(ts_env, inp, task_queue)).result()
    assert result.status == TaskStatus.SUCCESS
    taken = script.model_inputs[3].new_messages[0].content
    assert taken == (
        "Error: tool 'github.create_issue' is not available: the allowed-tools of the loaded skill "
        "ci-triage excludes it; tools you still have: github.get_job_log, skill.load, skill.read"
    )
    never_had = script.model_inputs[4].new_messages[0].content
    assert never_had.startswith("Error: unknown tool 'slack.post_message'")
    assert [call.tool for call in script.tool_calls] == ["github.get_job_log"]
    refused = [(a.tool, a.outcome) for a in script.audits if a.kind == "tool_refused"]
    assert refused[0][0] == "github.create_issue" and "ci-triage excludes it" in refused[0][1]
