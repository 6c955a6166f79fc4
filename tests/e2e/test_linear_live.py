"""Opt-in: the Linear tools and the Linear surface against real Linear.

Runs only with LINEAR_LIVE_API_KEY (a personal API key) or LINEAR_LIVE_ACCESS_TOKEN (the app's
actor=app OAuth token), and LINEAR_LIVE_ISSUE (an issue identifier such as ENG-123, in a team
kept for testing). It drives the Linear tools through the tool activity's own entry
(`execute_tool`) on that issue: it reads and searches it, comments twice under one idempotency
key (one comment), is refused a comment in another team, moves the issue to another state and
back, and checks each effect through Linear's API. It deletes its comment and, should the test
stop half-way, puts the issue back in the state it had.

With LINEAR_LIVE_AGENT_SESSION (an agent session of the app) and LINEAR_LIVE_ACCESS_TOKEN (only
the app posts in its sessions), it also posts a thought, an action and a response through the
Linear surface, each twice, and reads the session's activities back: one of each. Linear has
no way to delete an agent activity; use a session kept for testing.
OPENLOOP_LINEAR_API_URL points both at another endpoint.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import SecretStr

from activities.linear import surface as linear_surface
from activities.linear.client import graphql
from activities.linear.queries import ISSUE_UPDATE, WORKFLOW_STATES
from activities.linear.sessions import object_id
from activities.runtime import Runtime
from activities.tools.tool_activities import execute_tool
from config.settings import Settings
from workflows.types import (
    MemoryScopeRef,
    PostReplyInput,
    SurfaceContext,
    TaskStatus,
    ToolCallInput,
    ToolCallResult,
)

API_KEY = os.environ.get("LINEAR_LIVE_API_KEY")
ACCESS_TOKEN = os.environ.get("LINEAR_LIVE_ACCESS_TOKEN")
ISSUE = os.environ.get("LINEAR_LIVE_ISSUE")
SESSION = os.environ.get("LINEAR_LIVE_AGENT_SESSION")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not ((API_KEY or ACCESS_TOKEN) and ISSUE),
        reason="set LINEAR_LIVE_API_KEY (or LINEAR_LIVE_ACCESS_TOKEN) and LINEAR_LIVE_ISSUE to run",
    ),
]

# Documents only this test sends: reading back what the tools did, and cleaning up.
ISSUE_NOW = """
query IssueNow($id: String!, $marker: String!) {
  issue(id: $id) {
    id identifier title
    team { id key }
    state { id name type }
    comments(filter: { body: { contains: $marker } }) { nodes { id body } }
  }
}
"""
COMMENT_DELETE = "mutation CommentDelete($id: String!) { commentDelete(id: $id) { success } }"
SESSION_ACTIVITIES = """
query SessionActivities($id: String!) {
  agentSession(id: $id) {
    activities(last: 100) {
      nodes {
        id
        content {
          __typename
          ... on AgentActivityThoughtContent { body }
          ... on AgentActivityActionContent { action parameter result }
          ... on AgentActivityResponseContent { body }
        }
      }
    }
  }
}
"""


@dataclass(frozen=True)
class LiveIssue:
    id: str
    identifier: str
    title: str
    team_id: str
    team_key: str
    state: dict[str, Any]  # id, name, type: what the issue is put back to
    marker: str  # in every comment this run writes, and only in those


@pytest.fixture
def rt() -> Runtime:
    return Runtime(
        Settings(
            linear_access_token=SecretStr(ACCESS_TOKEN) if ACCESS_TOKEN else None,
            linear_api_key=SecretStr(API_KEY) if API_KEY else None,
            linear_api_url=os.environ.get("OPENLOOP_LINEAR_API_URL", "https://api.linear.app/graphql"),
        )
    )


async def issue_now(rt: Runtime, issue: str, marker: str) -> dict[str, Any]:
    found = (await graphql(rt.settings, ISSUE_NOW, {"id": issue, "marker": marker}))["issue"]
    assert isinstance(found, dict)
    return found


@pytest.fixture
async def live_issue(rt: Runtime) -> AsyncIterator[LiveIssue]:
    assert ISSUE is not None
    marker = f"openloop-live-{uuid.uuid4().hex[:12]}"
    found = await issue_now(rt, ISSUE, marker)
    issue = LiveIssue(
        found["id"],
        found["identifier"],
        found["title"],
        found["team"]["id"],
        found["team"]["key"],
        found["state"],
        marker,
    )
    yield issue
    after = await issue_now(rt, issue.id, marker)
    for comment in after["comments"]["nodes"]:
        deleted = await graphql(rt.settings, COMMENT_DELETE, {"id": comment["id"]})
        assert deleted["commentDelete"]["success"]
    if after["state"]["id"] != issue.state["id"]:  # the test stopped before moving it back
        await graphql(rt.settings, ISSUE_UPDATE, {"id": issue.id, "input": {"stateId": issue.state["id"]}})


def tool_call(tool: str, arguments: Mapping[str, object], key: str, ctx: SurfaceContext) -> ToolCallInput:
    memory = MemoryScopeRef("default", "live", "channel", "linear:live", "offline/hashing-256", 1)
    return ToolCallInput("task-linear-live", 1, key, tool, dict(arguments), key, ctx, memory, "live")


async def run(inp: ToolCallInput, rt: Runtime) -> ToolCallResult:
    return await execute_tool(inp, rt)  # what the tool activity runs, before auditing


async def other_state(rt: Runtime, issue: LiveIssue) -> dict[str, Any]:
    """A state to move the issue to and back: one of the same kind if the team has one, else
    an open one (a move to done or cancelled may set off the team's automations)."""
    data = await graphql(rt.settings, WORKFLOW_STATES, {"teamId": issue.team_id})
    states = [s for s in data["workflowStates"]["nodes"] if s["id"] != issue.state["id"]]
    assert states, f"team {issue.team_key} has a single workflow state: nowhere to move {issue.identifier}"
    same = [s for s in states if s["type"] == issue.state["type"]]
    open_ = [s for s in states if s["type"] in ("triage", "backlog", "unstarted", "started")]
    return (same or open_ or states)[0]


async def test_linear_tools_on_a_real_issue(rt: Runtime, live_issue: LiveIssue) -> None:
    issue = live_issue
    ctx = SurfaceContext("linear", issue.team_key, "live")

    read = await run(tool_call("linear.get_issue", {"issue": issue.identifier}, "get", ctx), rt)
    assert read.ok, read.output
    assert read.output.startswith(f"Issue {issue.identifier}: {issue.title}")
    assert f"State: {issue.state['name']} · team: {issue.team_key}" in read.output

    query = {"query": issue.title, "team": issue.team_key}
    found = await run(tool_call("linear.search_issues", query, "search", ctx), rt)
    assert found.ok and f"{issue.identifier} [" in found.output, found.output

    body = f"OpenLoop live test {issue.marker}: ignore me."
    key = f"linear-live:{issue.marker}"
    comment = tool_call(
        "linear.comment", {"team": issue.team_key, "issue": issue.identifier, "body": body}, key, ctx
    )
    first, again = await run(comment, rt), await run(comment, rt)  # a retried call comments once
    assert first.ok and first.output.startswith(f"Commented on {issue.identifier}"), first.output
    assert again.ok and again.output.startswith(f"Already commented on {issue.identifier}"), again.output
    comments = (await issue_now(rt, issue.id, issue.marker))["comments"]["nodes"]
    assert [c["id"] for c in comments] == [object_id(f"comment:{key}")]
    assert comments[0]["body"].strip() == body

    elsewhere = {"team": issue.team_key + "X", "issue": issue.identifier, "body": body + " (elsewhere)"}
    refused = await run(tool_call("linear.comment", elsewhere, f"{key}:elsewhere", ctx), rt)
    assert not refused.ok and refused.error_kind == "permission", refused.output
    assert len((await issue_now(rt, issue.id, issue.marker))["comments"]["nodes"]) == 1

    target = await other_state(rt, issue)
    for state in (target, issue.state):  # there, then back to the state it had
        move = {"team": issue.team_key, "issue": issue.identifier, "state": state["name"]}
        moved = await run(tool_call("linear.update_issue_state", move, f"{key}:{state['id']}", ctx), rt)
        assert moved.ok and moved.output == f"Moved {issue.identifier} to {state['name']}", moved.output
        assert (await issue_now(rt, issue.id, issue.marker))["state"]["id"] == state["id"]


@pytest.mark.skipif(
    not (SESSION and ACCESS_TOKEN),
    reason="set LINEAR_LIVE_AGENT_SESSION and LINEAR_LIVE_ACCESS_TOKEN (the app's token) to run",
)
async def test_a_task_in_a_real_agent_session(rt: Runtime, live_issue: LiveIssue) -> None:
    assert SESSION is not None
    issue = live_issue

    async def activities() -> list[dict[str, Any]]:
        data = await graphql(rt.settings, SESSION_ACTIVITIES, {"id": SESSION})
        return list(data["agentSession"]["activities"]["nodes"])

    before = {a["id"] for a in await activities()}
    task_id = f"task-linear-live-{uuid.uuid4().hex[:8]}"
    ctx = SurfaceContext("linear", issue.team_key, "live", thread=SESSION, reply_target=issue.id)
    call = tool_call("linear.get_issue", {"issue": issue.identifier}, f"{task_id}:1:call_1", ctx)
    result = await run(call, rt)
    assert result.ok, result.output
    reply = f"**Done.** Read {issue.identifier} ({issue.marker})."
    for _ in range(2):  # retried activities add nothing
        await linear_surface.task_started(PostReplyInput(task_id, ctx, "", TaskStatus.RUNNING, 0), rt)
        await linear_surface.report_tool_call(call, result, rt)
        await linear_surface.post_reply(PostReplyInput(task_id, ctx, reply, TaskStatus.SUCCESS, 2), rt)

    made = [a["content"] for a in await activities() if a["id"] not in before]
    kinds = sorted(content["__typename"] for content in made)
    assert kinds == [
        "AgentActivityActionContent",
        "AgentActivityResponseContent",
        "AgentActivityThoughtContent",
    ]
    new = {content["__typename"]: content for content in made}
    assert task_id in new["AgentActivityThoughtContent"]["body"]
    action = new["AgentActivityActionContent"]
    assert action["action"] == "linear.get_issue" and action["parameter"] == f"issue={issue.identifier}"
    assert action["result"].startswith(f"Issue {issue.identifier}")
    assert issue.marker in new["AgentActivityResponseContent"]["body"]
