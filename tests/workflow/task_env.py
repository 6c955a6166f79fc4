"""One agent task on the time-skipping server, for the workflow tests: a worker running the
scripted activities, the task's start and input, and the agents and scripts several test
modules share (an agent whose issue needs approval, an agent with budget and limit knobs)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.tools.catalog import specs_for
from config.loader import parse_agent
from tests.helpers import pending_approval
from tests.workflow.scripted import Script, say, use, wait_until_idle
from workers.sandbox import workflow_runner
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskInput, TaskResult

# An agent that may open an issue in acme/platform once U_ALICE approves, within three days.
AGENT_YAML = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: approver-test}
spec:
  model_policy: {default: scripted/model}
  tools:
    - {name: github.create_issue, permissions: [issues:write], limit_to: [acme/platform]}
  approvals:
    require_for: [github.create_issue]
    approvers: [U_ALICE]
    ttl: 72h
"""
ARGS = {"repo": "acme/platform", "title": "Track the decision"}

# An agent with a budget and limits to set: see `agent_yaml`.
CEILINGS = """
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {{name: ceiling-test}}
spec:
  model_policy: {{default: scripted/model, max_output_tokens: 500}}
  tools:
    - {{name: memory.search, permissions: [memory:read]}}
    - {{name: github.get_issue, permissions: [issues:read]}}
  approvals: {{approvers: [U_ALICE], ttl: 1h}}
  budget: {{per_task_usd: {usd}}}
  limits: {{max_iterations: {iterations}, token_limit: {tokens}, wall_clock: {wall}}}
"""

DEPLOYS = json.dumps({"query": "deploys"})
ROLLBACKS = json.dumps({"query": "rollbacks"})


def task_input(yaml_text: str = AGENT_YAML, **overrides: object) -> TaskInput:
    agent = parse_agent(yaml_text)
    return TaskInput(
        task_id=f"task-test-{uuid.uuid4().hex[:10]}",
        agent=agent,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="general", user="U_BOB"),
        request="open an issue",
        **{"tools": specs_for(agent), **overrides},  # type: ignore[arg-type]
    )


def agent_yaml(usd: float = 1.0, iterations: int = 10, tokens: int = 100_000, wall: str = "30m") -> str:
    return CEILINGS.format(usd=usd, iterations=iterations, tokens=tokens, wall=wall)


def worker(env: WorkflowEnvironment, script: Script, task_queue: str, **options: Any) -> Worker:
    return Worker(
        env.client,
        task_queue=task_queue,
        workflows=[AgentTaskWorkflow],
        activities=script.activities(),
        workflow_runner=workflow_runner(),
        **options,
    )


async def start(
    env: WorkflowEnvironment, inp: TaskInput, task_queue: str
) -> WorkflowHandle[AgentTaskWorkflow, TaskResult]:
    return await env.client.start_workflow(AgentTaskWorkflow.run, inp, id=inp.task_id, task_queue=task_queue)


async def pending_request(handle: WorkflowHandle[AgentTaskWorkflow, TaskResult]) -> tuple[str, str]:
    pending = await pending_approval(handle)
    # The request is posted after it becomes pending: let that finish, so the caller can stop
    # its worker without leaving work in flight.
    await wait_until_idle(handle)
    return pending.request_id, pending.action_id


def issue_script() -> Script:
    return Script([use("github.create_issue", json.dumps(ARGS)), say("Opened the issue.")])


def two_searches_then(answer: str) -> Script:
    return Script([use("memory.search", DEPLOYS, "c1"), use("memory.search", ROLLBACKS, "c2"), say(answer)])
