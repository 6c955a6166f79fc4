"""A GitHub task's approval is also asked in the agent's first Slack channel (real slack-sdk
and PyGithub against the local fake Slack and GitHub, real Postgres):

- a CI investigation's pull-request approval is a comment on the pull request and a card at
  the top of the agent's first Slack channel, once each however often the activity runs; its
  message ref names both, and the decision shows on both (the Slack card loses its buttons);
- a ref stored before (GitHub's alone) resolves the comment and leaves Slack alone;
- with Slack not configured, the comment still asks; with `report_to: [slack]` only, the card.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from activities import runtime as activity_runtime
from activities.github import client as github_client
from activities.github import surface as github_surface
from activities.runtime import Runtime
from activities.slack import blocks
from config.settings import Settings
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlack
from tests.integration.github_env import bind_agent, github_settings, new_repo, running_fake
from workflows.types import (
    ApprovalRequest,
    PostApprovalRequestInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
)

SLACK_TOKEN = "xoxb-github-approvals"
SHA = "0abc1234def5678"
PATCH = (
    "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-    return sum(values) / (len(values) + 1)\n+    return x\n"
)


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
def rt(db_settings: Settings, gh: FakeGitHub, slack: FakeSlack) -> Iterator[Runtime]:
    settings = github_settings(db_settings, gh).model_copy(
        update={"slack_bot_token": SecretStr(SLACK_TOKEN), "slack_api_url": slack.base_url}
    )
    yield activity_runtime.configure(settings)
    github_client.reset_clients()


def pull_request(repo: str) -> ApprovalRequest:
    return ApprovalRequest(
        "apr-pr-1",
        "act-pr-1",
        "github.create_pull_request",
        {
            "title": "Fix calc.mean",
            "body": "Divide by n.",
            "repo": repo,
            "base": "main",
            "diff": "1 file(s) changed, +1 −1",
            "diff_sha256": "f" * 64,
            "diff_preview": f"1 file(s) changed, 1 insertion(s)(+), 1 deletion(s)(-): calc.py\n\n{PATCH}",
            "full_diff": "openloop tasks diff task-ci-1",
            "tests_before": "failed: 1 failing (tests/test_calc.py::test_mean)",
            "tests_after": "passed (3 passed)",
            "cost_so_far_usd": 0.0123,
        },
        ["U_APPROVER", "alice"],
        "2025-01-02T10:00:00+00:00",
        "2025-01-05T10:00:00+00:00",
        "openai/gpt-4o-mini",
        0.0,
    )


def ci_context(repo: str, pull: str = "7") -> SurfaceContext:
    """A CI investigation of pull request `pull` (its head commit SHA)."""
    event = f"d-{uuid.uuid4().hex[:8]}"
    return SurfaceContext("github", repo, "alice", thread=pull, event_id=event, reply_target=SHA)


def decided(inp: PostApprovalRequestInput, ref: str | None) -> ResolveApprovalRequestInput:
    return ResolveApprovalRequestInput(
        inp.task_id, inp.context, inp.request, ref, "approved", "U_APPROVER", "2025-01-02T11:00:00+00:00"
    )


def new_channel() -> str:
    return f"C{uuid.uuid4().hex[:8].upper()}"


def cards(slack: FakeSlack, channel: str) -> list[dict[str, Any]]:
    return [m for m in slack._state.messages.get(channel, []) if m.get("bot_id")]


def block_types(message: dict[str, Any]) -> list[str]:
    return [block["type"] for block in message["blocks"]]


async def test_a_ci_pull_request_approval_is_asked_and_resolved_on_github_and_in_slack(
    gh: FakeGitHub, slack: FakeSlack, repo: str, rt: Runtime
) -> None:
    channel, second = new_channel(), new_channel()
    await bind_agent(
        rt.settings,
        repo,
        github={"ci": {"enabled": True, "report_to": ["pr_comment"]}},
        surfaces={"slack": {"channels": [channel, second]}},
    )
    gh.add_issue(repo, "CI fails")  # the pull request's conversation is issue #1 here
    ask = PostApprovalRequestInput("task-ci-1", ci_context(repo, "1"), pull_request(repo), "fixer")
    first = await github_surface.post_approval_request(ask, rt)
    again = await github_surface.post_approval_request(ask, rt)  # a retry of the activity

    [comment] = gh.comments(repo, 1)
    [card] = cards(slack, channel)
    assert first.message_ref == again.message_ref == f"issue:{comment['id']}|slack:{channel}:{card['ts']}"
    assert slack._state.messages.get(second) is None and "thread_ts" not in card
    assert comment["body"].startswith("**Approval needed**") and "```diff\n" in comment["body"]
    shown = str(card["blocks"])
    assert "*Fix calc.mean*" in shown and f"`{repo}` → `main`" in shown and "Approve" in shown
    assert "actions" in block_types(card) and "rich_text" in block_types(card)
    [actions] = [b for b in card["blocks"] if b["type"] == "actions"]
    value = blocks.parse_button_value(actions["elements"][0]["value"])
    assert value == ("task-ci-1", "apr-pr-1", "act-pr-1")

    await github_surface.resolve_approval_request(decided(ask, first.message_ref), rt)
    await github_surface.resolve_approval_request(decided(ask, first.message_ref), rt)  # a retry
    [comment] = gh.comments(repo, 1)
    [card] = cards(slack, channel)
    assert comment["body"].startswith("**Approval approved** by `U_APPROVER`")
    assert "- Tests after: passed (3 passed)" in comment["body"]
    assert "actions" not in block_types(card)
    assert card["metadata"]["event_payload"]["outcome"] == "approved"
    assert card["metadata"]["event_payload"]["agent"] == "fixer"


async def test_a_ref_stored_before_resolves_the_comment_and_leaves_slack_alone(
    gh: FakeGitHub, slack: FakeSlack, repo: str, rt: Runtime
) -> None:
    channel = new_channel()
    await bind_agent(rt.settings, repo, surfaces={"slack": {"channels": [channel]}})
    gh.add_issue(repo, "Discussion")
    context = SurfaceContext(surface="github", channel=repo, user="alice", thread="1", event_id="d-old-1")
    ask = PostApprovalRequestInput("task-gh-old-1", context, pull_request(repo), "helper")
    posted = await github_surface.post_approval_request(ask, rt)
    github_ref = str(posted.message_ref).split("|slack:")[0]
    updates = len(slack.calls_to("chat.update"))

    await github_surface.resolve_approval_request(decided(ask, github_ref), rt)
    [comment] = gh.comments(repo, 1)
    assert github_ref == f"issue:{comment['id']}"
    assert comment["body"].startswith("**Approval approved**")
    assert len(slack.calls_to("chat.update")) == updates
    [card] = cards(slack, channel)
    assert "actions" in block_types(card)  # still asking there: that ref never named it


async def test_without_slack_configured_the_comment_still_asks(
    gh: FakeGitHub, slack: FakeSlack, repo: str, rt: Runtime
) -> None:
    channel = new_channel()
    await bind_agent(rt.settings, repo, surfaces={"slack": {"channels": [channel]}})
    gh.add_issue(repo, "Discussion")
    no_slack = activity_runtime.configure(rt.settings.model_copy(update={"slack_bot_token": None}))
    context = SurfaceContext(surface="github", channel=repo, user="alice", thread="1", event_id="d-ns-1")
    ask = PostApprovalRequestInput("task-gh-ns-1", context, pull_request(repo), "helper")
    posted = await github_surface.post_approval_request(ask, no_slack)
    [comment] = gh.comments(repo, 1)
    assert posted.message_ref == f"issue:{comment['id']}"
    assert cards(slack, channel) == []
    await github_surface.resolve_approval_request(decided(ask, posted.message_ref), no_slack)
    assert gh.comments(repo, 1)[0]["body"].startswith("**Approval approved**")


async def test_a_ci_report_to_slack_only_asks_in_slack(
    gh: FakeGitHub, slack: FakeSlack, repo: str, rt: Runtime
) -> None:
    channel = new_channel()
    await bind_agent(
        rt.settings,
        repo,
        github={"ci": {"enabled": True, "report_to": ["slack"]}},
        surfaces={"slack": {"channels": [channel]}},
    )
    ask = PostApprovalRequestInput("task-ci-slack-1", ci_context(repo), pull_request(repo), "fixer")
    posted = await github_surface.post_approval_request(ask, rt)
    [card] = cards(slack, channel)
    assert posted.message_ref == f"|slack:{channel}:{card['ts']}"
    assert gh.commit_comments(repo, SHA) == []
    await github_surface.resolve_approval_request(decided(ask, posted.message_ref), rt)
    [card] = cards(slack, channel)
    assert "actions" not in block_types(card)
