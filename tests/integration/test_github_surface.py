"""The GitHub surface functions through real PyGithub against a local fake GitHub (and the
fake Slack), with real Postgres: replies posted once across retries, CI reports where
`report_to` says, approval comments updated with the decision, 👀 on the asking comment."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import SecretStr
from temporalio.exceptions import ApplicationError

from activities.github import client as github_client
from activities.github import surface as github_surface
from activities.runtime import Runtime
from config.settings import Settings
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlack
from tests.integration.github_env import bind_agent, github_settings, new_repo, running_fake
from workflows.types import (
    ApprovalRequest,
    PostApprovalRequestInput,
    PostReplyInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
    TaskStatus,
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeGitHub]:
    with running_fake() as server:
        yield server


@pytest.fixture
def repo(fake: FakeGitHub) -> str:
    return new_repo(fake)


@pytest.fixture
def rt(db_settings: Settings, fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    monkeypatch.setattr(github_client, "REQUEST_TIMEOUT_SECONDS", 1)
    yield Runtime(github_settings(db_settings, fake))
    github_client.reset_clients()


async def bind(rt: Runtime, repo: str, slack: bool = False, **github: object) -> None:
    surfaces = {"slack": {"channels": ["C0CI"]}} if slack else {}
    await bind_agent(rt.settings, repo, github=github, surfaces=surfaces)


def reply(context: SurfaceContext, text: str, status: TaskStatus = TaskStatus.SUCCESS) -> PostReplyInput:
    return PostReplyInput(task_id="task-github-d1", context=context, text=text, status=status, step=2)


async def test_a_reply_is_posted_once_on_the_issue_even_when_retried(
    fake: FakeGitHub, repo: str, rt: Runtime
) -> None:
    fake.add_issue(repo, "Question")
    context = SurfaceContext(surface="github", channel=repo, user="alice", thread="1", event_id="d1")
    fake.hang_after_accept("POST", f"/repos/{repo}/issues/1/comments", seconds=2.5)
    with pytest.raises(ApplicationError):
        await github_surface.post_reply(reply(context, "Which environment?", TaskStatus.WAITING_USER), rt)
    await github_surface.post_reply(reply(context, "Which environment?", TaskStatus.WAITING_USER), rt)
    [posted] = fake.comments(repo, 1)
    assert posted["body"].startswith("Which environment?\n\n_Reply in this thread to answer")


async def test_ci_reports_go_where_report_to_says(fake: FakeGitHub, repo: str, rt: Runtime) -> None:
    await bind(rt, repo, ci={"enabled": True, "report_to": ["commit_comment", "slack"]}, slack=True)
    fake.add_issue(repo, "A pull request", pull_request=True)
    context = SurfaceContext(
        surface="github", channel=repo, user="bob", thread="1", event_id="d2", reply_target="0abc1234"
    )
    with FakeSlack() as slack:
        slack_rt = Runtime(
            rt.settings.model_copy(
                update={"slack_bot_token": SecretStr(slack.token), "slack_api_url": slack.base_url}
            )
        )
        await github_surface.post_reply(reply(context, "test_invoice_rounding fails"), slack_rt)
        posts = slack.calls_to("chat.postMessage")
    assert fake.comments(repo, 1) == []  # pr_comment not asked for
    [on_commit] = fake.commit_comments(repo, "0abc1234")
    assert on_commit["body"].startswith("test_invoice_rounding fails")
    assert [p["channel"] for p in posts] == ["C0CI"] and "test_invoice_rounding" in posts[0]["text"]


async def test_ci_report_without_a_pull_request_falls_back_to_the_commit(
    fake: FakeGitHub, repo: str, rt: Runtime
) -> None:
    await bind(rt, repo, ci={"enabled": True, "report_to": ["pr_comment"]})
    context = SurfaceContext(
        surface="github", channel=repo, user="bob", event_id="d3", reply_target="0def5678"
    )
    await github_surface.post_reply(reply(context, "lint failed"), rt)
    assert len(fake.commit_comments(repo, "0def5678")) == 1


async def test_approval_request_comment_is_updated_with_the_decision(
    fake: FakeGitHub, repo: str, rt: Runtime
) -> None:
    fake.add_issue(repo, "Discussion")
    context = SurfaceContext(surface="github", channel=repo, user="alice", thread="1", event_id="d4")
    request = ApprovalRequest(
        "req-1",
        "act-1",
        "github.create_issue",
        {"repo": repo, "title": "Track it"},
        ["cli:local"],
        "2024-05-01T10:00:00Z",
        "2024-05-04T10:00:00Z",
        "offline/demo",
        0.0,
    )
    posted = await github_surface.post_approval_request(
        PostApprovalRequestInput("task-github-d4", context, request, "helper"), rt
    )
    body = fake.comments(repo, 1)[0]["body"]
    assert "`github.create_issue`" in body and "openloop approve task-github-d4" in body
    assert posted.message_ref == f"issue:{fake.comments(repo, 1)[0]['id']}"
    await github_surface.resolve_approval_request(
        ResolveApprovalRequestInput(
            "task-github-d4",
            context,
            request,
            posted.message_ref,
            "approved",
            "cli:local",
            "2024-05-01T11:00:00Z",
        ),
        rt,
    )
    [updated] = fake.comments(repo, 1)
    assert updated["body"].startswith("**Approval approved** by `cli:local`")
