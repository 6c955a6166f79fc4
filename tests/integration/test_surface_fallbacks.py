"""What a task says survives its target going away (real slack-sdk and PyGithub against the
local fake Slack and GitHub, real Postgres):

- the final answer, when the issue, pull request, commit or Slack thread it answers is gone,
  falls back (commit -> the agent's first Slack channel -> a new issue; a Slack thread -> the
  channel) and the `openloop.surface.post_reply` activity does not fail for it;
- a deleted progress or approval message is posted again instead of failing;
- an approval message that already shows a decision (after `temporal workflow reset`) is
  never reused for the same request asked again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.testing import ActivityEnvironment

from activities import runtime as activity_runtime
from activities import surface_activities
from activities.github import client as github_client
from activities.github import surface as github_surface
from activities.runtime import Runtime
from activities.slack import surface as slack_surface
from config.settings import Settings
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import BOT_USER, FakeSlack
from tests.integration.github_env import bind_agent, github_settings, new_repo, running_fake
from workflows.types import (
    ApprovalRequest,
    PostApprovalRequestInput,
    PostReplyInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
    TaskStatus,
)

SLACK_TOKEN = "xoxb-fallback-token"
CHANNEL = "C0FALL"
SHA = "0abc1234def5678"


@pytest.fixture(scope="module")
def gh() -> Iterator[FakeGitHub]:
    with running_fake() as server:
        yield server


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(token=SLACK_TOKEN) as server:
        yield server


@pytest.fixture
def repo(gh: FakeGitHub) -> str:
    return new_repo(gh)


@pytest.fixture
def rt(
    db_settings: Settings, gh: FakeGitHub, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Runtime]:
    monkeypatch.setattr(github_client, "REQUEST_TIMEOUT_SECONDS", 1)
    settings = github_settings(db_settings, gh).model_copy(
        update={"slack_bot_token": SecretStr(SLACK_TOKEN), "slack_api_url": slack.base_url}
    )
    yield activity_runtime.configure(settings)  # the activities read it too
    github_client.reset_clients()


def request(request_id: str = "apr-1") -> ApprovalRequest:
    return ApprovalRequest(
        request_id,
        "act-1",
        "github.create_issue",
        {"title": "Track it"},
        ["U_APPROVER"],
        "2025-01-02T10:00:00+00:00",
        "2025-01-05T10:00:00+00:00",
        "offline/demo",
        0.0,
    )


def resolved(
    task_id: str, ctx: SurfaceContext, ref: str | None, req: ApprovalRequest
) -> ResolveApprovalRequestInput:
    return ResolveApprovalRequestInput(
        task_id, ctx, req, ref, "approved", "U_APPROVER", "2025-01-02T11:00:00+00:00"
    )


def forget_issue(gh: FakeGitHub, repo: str, number: int) -> None:
    """As if the issue was deleted (or transferred): GitHub answers 404 for it from now on."""
    with gh._lock:
        gh._repos[repo.lower()].issues.pop(number)
        gh._repos[repo.lower()].comments.pop(number, None)


def delete_comment(gh: FakeGitHub, repo: str, number: int, comment_id: int) -> None:
    with gh._lock:
        comments = gh._repos[repo.lower()].comments[number]
        comments[:] = [c for c in comments if c["id"] != comment_id]


def top_level(slack: FakeSlack, channel: str = CHANNEL) -> list[dict[str, Any]]:
    return [m for m in slack._state.messages.get(channel, []) if m.get("bot_id") and "thread_ts" not in m]


def new_channel() -> str:
    """Agents never share a Slack channel: each test binds its own."""
    return f"C{uuid.uuid4().hex[:8].upper()}"


# GitHub: the final answer ------------------------------------------------------------------


async def test_an_answer_for_a_deleted_issue_goes_to_the_agents_slack_channel(
    gh: FakeGitHub, slack: FakeSlack, repo: str, rt: Runtime
) -> None:
    channel = new_channel()
    await bind_agent(rt.settings, repo, surfaces={"slack": {"channels": [channel]}})
    gh.add_issue(repo, "Why is deploy slow?")
    forget_issue(gh, repo, 1)
    ctx = SurfaceContext(surface="github", channel=repo, user="alice", thread="1", event_id="d-gone-1")
    reply = PostReplyInput(
        "task-gh-gone-1", ctx, "The cache is cold after each deploy.", TaskStatus.SUCCESS, 3
    )
    env = ActivityEnvironment()
    for _ in range(2):  # the activity, and a retry of it
        await env.run(surface_activities.post_reply, reply)
    [posted] = top_level(slack, channel)
    assert posted["text"].startswith(f"Answer for {repo} #1 (GitHub could not take the comment):")
    assert "The cache is cold after each deploy." in posted["text"]


async def test_a_ci_report_whose_pull_request_is_gone_lands_on_the_commit(
    gh: FakeGitHub, repo: str, rt: Runtime
) -> None:
    await bind_agent(rt.settings, repo, github={"ci": {"enabled": True, "report_to": ["pr_comment"]}})
    ctx = SurfaceContext(
        surface="github", channel=repo, user="bob", thread="5", event_id="d-gone-2", reply_target=SHA
    )
    await github_surface.post_reply(
        PostReplyInput("task-gh-gone-2", ctx, "lint failed", TaskStatus.SUCCESS, 2), rt
    )
    [on_commit] = gh.commit_comments(repo, SHA)
    assert on_commit["body"].startswith("lint failed")


async def test_a_ci_report_with_pull_request_and_commit_gone_goes_to_the_first_slack_channel(
    gh: FakeGitHub, slack: FakeSlack, repo: str, rt: Runtime
) -> None:
    channel, second = new_channel(), new_channel()
    await bind_agent(
        rt.settings,
        repo,
        github={"ci": {"enabled": True, "report_to": ["pr_comment", "commit_comment"]}},
        surfaces={"slack": {"channels": [channel, second]}},
    )
    gh.fail("POST", f"/repos/{repo}/commits/{SHA}/comments", status=422, times=5, message="No commit found")
    ctx = SurfaceContext(
        surface="github", channel=repo, user="bob", thread="9", event_id="d-gone-3", reply_target=SHA
    )
    reply = PostReplyInput("task-gh-gone-3", ctx, "test_rounding fails", TaskStatus.SUCCESS, 2)
    await ActivityEnvironment().run(surface_activities.post_reply, reply)
    [posted] = top_level(slack, channel)
    assert posted["text"].startswith(f"CI report for {repo} #9") and "test_rounding fails" in posted["text"]
    assert slack._state.messages.get(second) is None


async def test_with_nowhere_else_to_go_the_answer_opens_one_new_issue(
    gh: FakeGitHub, repo: str, rt: Runtime
) -> None:
    await bind_agent(rt.settings, repo)  # no Slack channel
    ctx = SurfaceContext(surface="github", channel=repo, user="alice", thread="3", event_id="d-gone-4")
    reply = PostReplyInput("task-gh-gone-4", ctx, "Use the staging token.", TaskStatus.SUCCESS, 4)
    env = ActivityEnvironment()
    for _ in range(2):
        await env.run(surface_activities.post_reply, reply)
    [issue] = gh.issues(repo)
    assert issue["title"] == f"OpenLoop answer for {repo} #3"
    assert issue["body"].startswith("Use the staging token.") and "could not take a comment" in issue["body"]


# GitHub: comments the task edits ------------------------------------------------------------


async def test_a_deleted_approval_comment_is_posted_again(gh: FakeGitHub, repo: str, rt: Runtime) -> None:
    gh.add_issue(repo, "Discussion")
    ctx = SurfaceContext(surface="github", channel=repo, user="alice", thread="1", event_id="d-del-1")
    ask = PostApprovalRequestInput("task-gh-del-1", ctx, request(), "helper")
    first = await github_surface.post_approval_request(ask, rt)
    delete_comment(gh, repo, 1, gh.comments(repo, 1)[0]["id"])
    again = await github_surface.post_approval_request(ask, rt)  # a retry after the delete
    [comment] = gh.comments(repo, 1)
    assert again.message_ref == f"issue:{comment['id']}" != first.message_ref
    assert comment["body"].startswith("**Approval needed**")


async def test_after_a_reset_a_decided_approval_comment_is_not_reused(
    gh: FakeGitHub, repo: str, rt: Runtime
) -> None:
    gh.add_issue(repo, "Discussion")
    ctx = SurfaceContext(surface="github", channel=repo, user="alice", thread="1", event_id="d-reset-1")
    ask = PostApprovalRequestInput("task-gh-reset-1", ctx, request(), "helper")
    first = await github_surface.post_approval_request(ask, rt)
    await github_surface.resolve_approval_request(
        resolved("task-gh-reset-1", ctx, first.message_ref, request()), rt
    )
    # `temporal workflow reset` re-runs the step: the same request id is asked again.
    second = await github_surface.post_approval_request(ask, rt)
    again = await github_surface.post_approval_request(ask, rt)  # and retried
    old, new = gh.comments(repo, 1)
    assert first.message_ref == f"issue:{old['id']}" and old["body"].startswith("**Approval approved**")
    assert second.message_ref == again.message_ref == f"issue:{new['id']}"
    assert new["body"].startswith("**Approval needed**")


# Slack ------------------------------------------------------------------------------------------


def slack_thread(slack: FakeSlack) -> tuple[SurfaceContext, str]:
    root = slack.add_message(CHANNEL, f"<@{BOT_USER}> which region do we deploy to?", user="U_ALICE")
    return SurfaceContext(
        "slack", CHANNEL, "U_ALICE", thread=root, event_id="EvGone", reply_target=root
    ), root


def delete_thread(slack: FakeSlack, root: str) -> None:
    for message in slack.thread(CHANNEL, root):
        slack.delete_message(CHANNEL, message["ts"])


async def test_an_answer_for_a_deleted_thread_is_posted_in_the_channel_once(
    slack: FakeSlack, rt: Runtime
) -> None:
    ctx, root = slack_thread(slack)
    await slack_surface.task_started(PostReplyInput("task-sl-1", ctx, "", TaskStatus.RUNNING, 0), rt)
    delete_thread(slack, root)
    reply = PostReplyInput("task-sl-1", ctx, "We deploy to **eu-west-1**.", TaskStatus.SUCCESS, 2)
    env = ActivityEnvironment()
    for _ in range(2):
        await env.run(surface_activities.post_reply, reply)
    [posted] = top_level(slack)
    assert posted["text"] == f"{slack_surface.THREAD_GONE_NOTE}\nWe deploy to *eu-west-1*."


async def test_a_thread_that_refuses_replies_sends_the_answer_to_the_channel(
    slack: FakeSlack, rt: Runtime
) -> None:
    ctx, root = slack_thread(slack)
    slack.fail_next("chat.postMessage", "thread_not_found")
    await slack_surface.post_reply(PostReplyInput("task-sl-2", ctx, "eu-west-1", TaskStatus.SUCCESS, 2), rt)
    assert [m["text"] for m in top_level(slack)] == ["eu-west-1"]


@pytest.mark.parametrize("how", ["deleted before", "deleted while updating"])
async def test_a_deleted_progress_message_is_posted_again(slack: FakeSlack, rt: Runtime, how: str) -> None:
    ctx, root = slack_thread(slack)
    await slack_surface.task_started(PostReplyInput("task-sl-3", ctx, "", TaskStatus.RUNNING, 0), rt)
    [progress] = [m for m in slack.thread(CHANNEL, root) if m.get("bot_id")]
    if how == "deleted before":
        slack.delete_message(CHANNEL, progress["ts"])
    else:
        slack.fail_next("chat.update", "message_not_found")
    ask = PostApprovalRequestInput("task-sl-3", ctx, request("apr-sl-3"), "helper")
    await slack_surface.post_approval_request(ask, rt)
    shown = [m for m in slack.thread(CHANNEL, root) if "Waiting for approval" in m.get("text", "")]
    assert len(shown) == 1 and shown[0]["ts"] != progress["ts"]


async def test_after_a_reset_a_decided_approval_message_is_not_reused(slack: FakeSlack, rt: Runtime) -> None:
    ctx, root = slack_thread(slack)
    req = request("apr-sl-5")
    ask = PostApprovalRequestInput("task-sl-5", ctx, req, "helper")
    first = await slack_surface.post_approval_request(ask, rt)
    await slack_surface.resolve_approval_request(resolved("task-sl-5", ctx, first.message_ref, req), rt)
    second = await slack_surface.post_approval_request(ask, rt)  # the same request, asked again
    again = await slack_surface.post_approval_request(ask, rt)
    assert second.message_ref == again.message_ref != first.message_ref
    assert second.message_ref is not None
    fresh = next(m for m in slack.thread(CHANNEL, root) if m["ts"] == second.message_ref.split(":")[1])
    assert any(b["type"] == "actions" for b in fresh["blocks"])  # approvable again
