"""A triage agent with two skills, for the tests of a skill's `allowed-tools`: `ci-triage`
allows only reading job logs (and a Slack tool the agent lacks), `thread-summary` everything."""

from __future__ import annotations

import json
import uuid

from activities.tools.catalog import NATIVE_TOOLS
from config.loader import parse_agent
from workflows.tools.agents import delegate
from workflows.types import SkillRef, SurfaceContext, TaskInput

AGENT = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: triager}
spec:
  model_policy: {default: scripted/model}
  tools:
    - {name: github.get_job_log, permissions: [actions:read]}
    - {name: github.create_issue, permissions: [issues:write], limit_to: [acme/platform]}
    - {name: memory.search, permissions: [memory:read]}
    - {name: agent.delegate, permissions: ["agents:delegate"]}
  skills: [ci-triage, thread-summary]
"""
# The skill allows a tool the agent lacks (slack.post_message): it stays absent.
TRIAGE = SkillRef(
    "ci-triage", 2, "c" * 64, "Find why a CI run failed", ("github.get_job_log", "slack.post_message")
)
SUMMARY = SkillRef("thread-summary", 1, "d" * 64, "Summarise a thread")  # allows everything it had

ISSUE = json.dumps({"repo": "acme/platform", "title": "CI is red"})
LOG = json.dumps({"repo": "acme/platform", "job_id": 7})


def task(**overrides: object) -> TaskInput:
    natives = [
        NATIVE_TOOLS[name].spec for name in ("github.get_job_log", "github.create_issue", "memory.search")
    ]
    return TaskInput(
        task_id=f"task-narrow-{uuid.uuid4().hex[:10]}",
        agent=parse_agent(AGENT),
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="why did CI fail?",
        tools=[*natives, delegate.spec],
        **{"skills": [TRIAGE, SUMMARY], **overrides},  # type: ignore[arg-type]
    )
