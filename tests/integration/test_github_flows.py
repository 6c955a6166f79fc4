"""Whole GitHub flows on the real dev server, real Postgres, a worker with the real
activities and a local fake GitHub: an approved issue created exactly once although the first
create timed out after GitHub accepted it, and a failed CI run investigated and reported on
its pull request (with a scripted model standing in for the provider)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client

from activities.github import client as github_client
from config.settings import Settings
from tests.fakes.github_api import FakeGitHub
from tests.helpers import approve_when_pending
from tests.integration.github_env import SHA, Env, comment, failed_run, running_fake, webhook_env
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import (
    ActivityName,
    ModelCallInput,
    ModelCallResult,
    ModelUsage,
    TaskStatus,
    ToolCall,
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeGitHub]:
    with running_fake() as server:
        yield server


@pytest.fixture
async def env(
    settings: Settings, client: Client, fake: FakeGitHub, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Env]:
    monkeypatch.setattr(github_client, "REQUEST_TIMEOUT_SECONDS", 1)
    async with webhook_env(settings, client, fake, task_queue) as value:
        yield value


async def test_approved_issue_is_created_once_although_the_first_call_timed_out(
    env: Env, client: Client
) -> None:
    env.fake.add_issue(env.repo, "Flaky deploy")
    await env.bind_agent(
        tools=[{"name": "github.create_issue", "permissions": ["issues:write"], "limit_to": [env.repo]}],
        approvals={"require_for": ["github.create_issue"], "approvers": ["cli:local"]},
    )
    from workers.worker import build_worker  # every activity: imported only where needed

    env.fake.hang_after_accept("POST", f"/repos/{env.repo}/issues", seconds=2.5)
    async with build_worker(client, env.settings):
        response = await env.post(
            "issue_comment", comment(env.repo, "@openloop please open an issue to track the flaky deploy")
        )
        handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, response.json()["task_id"])
        await approve_when_pending(handle)
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == TaskStatus.SUCCESS, result.reason
    created = [i for i in env.fake.issues(env.repo) if i["number"] != 1]
    assert len(created) == 1 and env.fake.count("POST", f"/repos/{env.repo}/issues") == 1
    assert env.fake.count("GET", f"/repos/{env.repo}/issues") >= 1  # the retry looked for the marker
    bodies = [c["body"] for c in env.fake.comments(env.repo, 1)]
    assert any(b.startswith("**Approval approved** by `cli:local`") for b in bodies)  # request, updated
    assert any(f"issue #{created[0]['number']}" in b for b in bodies)  # the reply
    assert ("issues/comments/321", "eyes") in env.fake.reactions


def ci_investigator() -> Any:
    """A scripted model: list the failed runs, read the failed job's log, report what it says."""

    @activity.defn(name=ActivityName.CALL_MODEL)
    async def scripted_model(inp: ModelCallInput) -> ModelCallResult:
        tool_results = [m.content for m in inp.new_messages if m.role == "tool"]
        request = next((m.content for m in inp.new_messages if m.role == "user"), "")
        if "list_failed_runs(" in request:
            match = re.search(r"list_failed_runs\(repo='([^']+)', branch='([^']+)'\)", request)
            assert match
            call = ToolCall(
                "c1",
                "github__list_failed_runs",
                json.dumps({"repo": match.group(1), "branch": match.group(2)}),
            )
        elif tool_results and "failed job " in tool_results[-1]:
            job_id = int(tool_results[-1].split("failed job ")[1].split()[0])
            repo = tool_results[-1].split("failed workflow runs in ")[1].split()[0]
            call = ToolCall("c2", "github__get_job_log", json.dumps({"repo": repo, "job_id": job_id}))
        else:
            hints = tool_results[-1].split("Lines that look like the failure:")[1].split("---")[0]
            text = "CI investigation: the failing test is\n" + hints.strip()
            usage = ModelUsage("scripted/model", 100, 20, 0.0)
            return ModelCallResult(
                text, [], "stop", usage, inp.transcript_upto + len(inp.new_messages) + 1, inp.max_tokens
            )
        usage = ModelUsage("scripted/model", 100, 20, 0.0)
        return ModelCallResult(
            "", [call], "tool_calls", usage, inp.transcript_upto + len(inp.new_messages) + 1, inp.max_tokens
        )

    return scripted_model


async def test_a_failed_run_is_investigated_and_reported_on_the_pull_request(
    env: Env, client: Client
) -> None:
    env.fake.add_issue(env.repo, "Speed up billing", pull_request=True)
    log = "\n".join(
        [f"collected {i}" for i in range(500)]
        + [
            "FAILED tests/test_billing.py::test_invoice_rounding - AssertionError: 10.01 != 10.0",
            "##[error]Process completed with exit code 1.",
        ]
    )
    env.fake.add_failed_run(env.repo, "CI", "feature/billing", SHA, {"tests": ("Run pytest", log)})
    await env.bind_agent(
        tools=[
            {"name": "github.list_failed_runs", "permissions": ["actions:read"]},
            {"name": "github.get_job_log", "permissions": ["actions:read"]},
        ],
        github={
            "ci": {"enabled": True, "branches": ["feature/*"], "report_to": ["pr_comment", "commit_comment"]}
        },
    )
    from activities.llm.model_activities import call_model
    from workers.worker import ACTIVITIES, build_worker

    activities = [a for a in ACTIVITIES if a is not call_model] + [ci_investigator()]
    async with build_worker(client, env.settings, activities=activities):
        response = await env.post("workflow_run", failed_run(env.repo, "feature/billing", pr=1))
        handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, response.json()["task_id"])
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == TaskStatus.SUCCESS, result.reason
    [report] = [c["body"] for c in env.fake.comments(env.repo, 1)]
    assert "tests/test_billing.py::test_invoice_rounding" in report
    [on_commit] = [c["body"] for c in env.fake.commit_comments(env.repo, SHA)]
    assert on_commit.split("<!--")[0] == report.split("<!--")[0]  # same report, own marker
