"""Skills in a task, on the time-skipping server: listed by name and description in the
system prompt, loaded on demand from the version the task started with."""

from __future__ import annotations

import json
import uuid

from temporalio.testing import WorkflowEnvironment

from config.loader import parse_agent
from tests.workflow.scripted import Script, say, use
from tests.workflow.task_env import start, worker
from workflows.prompts import SKILLS_HEADER
from workflows.types import SkillRef, SurfaceContext, TaskInput, TaskStatus

AGENT = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: skilled}
spec:
  model_policy: {default: scripted/model}
  skills: [thread-summary, ci-triage]
"""
SKILLS = [
    SkillRef("thread-summary", 3, "a" * 64, "Summarise a thread and capture its decision"),
    SkillRef("ci-triage", 1, "b" * 64, "Find why a CI run failed"),
]


async def test_skills_are_listed_then_loaded_from_the_pinned_version(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script(
        [
            use("skill.load", json.dumps({"name": "thread-summary"}), "c1"),
            use("skill.read", json.dumps({"name": "thread-summary", "path": "template.md"}), "c2"),
            use("skill.load", json.dumps({"name": "no-such-skill"}), "c3"),
            say("Summarised."),
        ]
    )
    inp = TaskInput(
        task_id=f"task-skills-{uuid.uuid4().hex[:10]}",
        agent=parse_agent(AGENT),
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="summarise this thread",
        skills=SKILLS,
        max_steps_per_run=1,  # a new run before every step: the pinned skills go on
    )
    async with worker(ts_env, script, task_queue):
        result = await (await start(ts_env, inp, task_queue)).result()
    assert result.status == TaskStatus.SUCCESS
    system = script.model_inputs[0].new_messages[0].content
    assert SKILLS_HEADER in system
    assert "- thread-summary: Summarise a thread and capture its decision" in system
    assert "ci-triage" in system and "# Skill" not in system  # names and descriptions only
    assert {"skill.load", "skill.read"} <= set(script.model_inputs[0].offered_tools)
    assert [(read.skill.version, read.path) for read in script.skill_reads] == [(3, None), (3, "template.md")]
    told = script.model_inputs[3].new_messages[0].content
    assert "no skill 'no-such-skill'" in told and "thread-summary, ci-triage" in told


async def test_a_task_without_skills_is_offered_no_skill_tools(
    ts_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = Script([say("Hi.")])
    inp = TaskInput(
        task_id=f"task-noskills-{uuid.uuid4().hex[:10]}",
        agent=parse_agent(AGENT.replace("  skills: [thread-summary, ci-triage]\n", "")),
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="hello",
    )
    async with worker(ts_env, script, task_queue):
        await (await start(ts_env, inp, task_queue)).result()
    assert not any(name.startswith("skill.") for name in script.model_inputs[0].offered_tools)
    assert SKILLS_HEADER not in script.model_inputs[0].new_messages[0].content
