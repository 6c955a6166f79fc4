"""Linear issue tools: get_issue, search_issues, comment, create_issue, update_issue_state.

Writes name the `team` they act in (a key such as ENG, or a team id); the workflow refuses a
team the agent is not bound to (`spec.surfaces.linear.teams`, `WriteBound.LINEAR_TEAMS`)
before asking for any approval, and the handler refuses an issue that is not in that team, so
a write can only land where the agent works. Creates carry an id derived from the call's
idempotency key (`activities.linear.sessions.create_once`): a retried call makes one comment
or issue. What Linear returns is data for the model, bounded here and wrapped as untrusted
by the workflow.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from activities.linear import queries
from activities.linear.client import LinearError, LinearNotConfigured, activity_error, graphql
from activities.linear.sessions import create_once, object_id
from activities.runtime import Runtime
from activities.tool_errors import ToolError, ToolErrorKind
from activities.tools.native import NonEmpty, ToolArgs, native_tool
from workflows.tool_catalog import WriteBound
from workflows.types import ToolCallInput

MAX_DESCRIPTION = 4000
MAX_COMMENT = 1500
MAX_SEARCH_RESULTS = 20
MAX_OUTPUT = 12_000
T = TypeVar("T")


class IssueArgs(ToolArgs):
    issue: NonEmpty  # ENG-123, or the issue's id


class SearchArgs(ToolArgs):
    query: NonEmpty
    team: str | None = None  # a team key or id to search in


class CommentArgs(ToolArgs):
    team: NonEmpty
    issue: NonEmpty
    body: NonEmpty


class CreateIssueArgs(ToolArgs):
    team: NonEmpty
    title: NonEmpty
    description: str = ""


class UpdateStateArgs(ToolArgs):
    team: NonEmpty
    issue: NonEmpty
    state: NonEmpty  # the workflow state's name (In Progress, Done) or id


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _call(doing: str, call: Awaitable[T]) -> T:
    """A Linear call from a tool: refusals the model can act on as `ToolError`, rate limits
    and outages as the activity's retryable errors."""
    try:
        return await call
    except LinearNotConfigured as exc:
        raise activity_error(exc, doing) from None
    except LinearError as exc:
        if exc.code == "RATELIMITED" or exc.retryable:
            raise activity_error(exc, doing) from None
        raise ToolError(ToolErrorKind.FAILED, f"Linear refused {doing}: {exc}") from None


async def _issue(rt: Runtime, issue: str, document: str = queries.ISSUE) -> dict[str, Any]:
    data = await _call(f"reading issue {issue}", graphql(rt.settings, document, {"id": issue}))
    found = data.get("issue")
    if not isinstance(found, dict):
        raise ToolError(ToolErrorKind.NOT_FOUND, f"no Linear issue {issue}")
    return found


def _in_team(issue: dict[str, Any], team: str) -> None:
    owner = issue.get("team") or {}
    if team.upper() != str(owner.get("key", "")).upper() and team.lower() != str(owner.get("id", "")).lower():
        raise ToolError(
            ToolErrorKind.PERMISSION,
            f"issue {issue.get('identifier')} belongs to team {owner.get('key')}, not {team}",
        )


async def _team_id(rt: Runtime, team: str) -> str:
    if len(team) == 36 and team.count("-") == 4:
        return team
    data = await _call(
        f"finding team {team}", graphql(rt.settings, queries.TEAM_BY_KEY, {"key": team.upper()})
    )
    nodes = (data.get("teams") or {}).get("nodes") or []
    if not nodes:
        raise ToolError(ToolErrorKind.NOT_FOUND, f"no Linear team with the key {team}")
    return str(nodes[0]["id"])


@native_tool(
    "linear.get_issue",
    IssueArgs,
    "Read a Linear issue (ENG-123) with its state, team and latest comments.",
    permission="issues:read",
    writes=False,
)
async def get_issue(args: IssueArgs, inp: ToolCallInput, rt: Runtime) -> str:
    issue = await _issue(rt, args.issue.strip())
    state, team = issue.get("state") or {}, issue.get("team") or {}
    lines = [
        f"Issue {issue.get('identifier')}: {issue.get('title')}",
        f"State: {state.get('name')} · team: {team.get('key')} · assignee: "
        f"{(issue.get('assignee') or {}).get('name') or 'none'}",
        f"URL: {issue.get('url', '')}",
        "",
        _bounded(str(issue.get("description") or "(no description)"), MAX_DESCRIPTION),
    ]
    comments = ((issue.get("comments") or {}).get("nodes")) or []
    if comments:
        lines += ["", f"Latest comments ({len(comments)}):"]
    for comment in comments:
        who = (comment.get("user") or {}).get("name") or "someone"
        lines += [
            f"--- {who} at {comment.get('createdAt', '')}:",
            _bounded(str(comment.get("body") or ""), MAX_COMMENT),
        ]
    return _bounded("\n".join(lines), MAX_OUTPUT)


@native_tool(
    "linear.search_issues",
    SearchArgs,
    "Search Linear issues by text, optionally in one team (key such as ENG).",
    permission="issues:read",
    writes=False,
)
async def search_issues(args: SearchArgs, inp: ToolCallInput, rt: Runtime) -> str:
    team_id = await _team_id(rt, args.team.strip()) if args.team else None
    variables = {"term": args.query.strip(), "teamId": team_id, "first": MAX_SEARCH_RESULTS}
    data = await _call("searching issues", graphql(rt.settings, queries.SEARCH_ISSUES, variables))
    nodes = (data.get("searchIssues") or {}).get("nodes") or []
    if not nodes:
        return f"No Linear issues match {args.query!r}."
    lines = [f"{len(nodes)} match(es) for {args.query!r}:"]
    lines += [
        f"{n.get('identifier')} [{(n.get('state') or {}).get('name')}] {n.get('title')} — {n.get('url', '')}"
        for n in nodes[:MAX_SEARCH_RESULTS]
    ]
    return _bounded("\n".join(lines), MAX_OUTPUT)


@native_tool(
    "linear.comment",
    CommentArgs,
    "Comment on a Linear issue of one of your teams (team key, issue ENG-123, Markdown body).",
    permission="issues:write",
    writes=True,
    bound_argument="team",
    bound_by=WriteBound.LINEAR_TEAMS,
)
async def comment(args: CommentArgs, inp: ToolCallInput, rt: Runtime) -> str:
    issue = await _issue(rt, args.issue.strip(), queries.ISSUE_TEAM)
    _in_team(issue, args.team.strip())
    the_id = object_id(f"comment:{inp.idempotency_key}")
    variables = {"input": {"id": the_id, "issueId": issue["id"], "body": args.body.strip()}}
    made, created = await _call(
        f"commenting on {issue.get('identifier')}",
        create_once(
            rt.settings,
            queries.COMMENT_CREATE,
            variables,
            "commentCreate",
            queries.COMMENT,
            "comment",
            the_id,
        ),
    )
    url = (made.get("comment") or made).get("url", "")
    verb = "Commented" if created else "Already commented"
    return f"{verb} on {issue.get('identifier')}\n{url}"


@native_tool(
    "linear.create_issue",
    CreateIssueArgs,
    "Create a Linear issue in one of your teams (team key such as ENG).",
    permission="issues:write",
    writes=True,
    bound_argument="team",
    bound_by=WriteBound.LINEAR_TEAMS,
)
async def create_issue(args: CreateIssueArgs, inp: ToolCallInput, rt: Runtime) -> str:
    team_id = await _team_id(rt, args.team.strip())
    the_id = object_id(f"issue:{inp.idempotency_key}")
    fields = {"id": the_id, "teamId": team_id, "title": args.title.strip(), "description": args.description}
    made, created = await _call(
        "creating an issue",
        create_once(
            rt.settings,
            queries.ISSUE_CREATE,
            {"input": fields},
            "issueCreate",
            queries.ISSUE,
            "issue",
            the_id,
        ),
    )
    issue = made.get("issue") or made
    verb = "Created" if created else "Already created"
    return f"{verb} issue {issue.get('identifier')}: {args.title.strip()}\n{issue.get('url', '')}"


@native_tool(
    "linear.update_issue_state",
    UpdateStateArgs,
    "Move a Linear issue of one of your teams to a workflow state (by name, e.g. In Progress).",
    permission="issues:write",
    writes=True,
    bound_argument="team",
    bound_by=WriteBound.LINEAR_TEAMS,
)
async def update_issue_state(args: UpdateStateArgs, inp: ToolCallInput, rt: Runtime) -> str:
    issue = await _issue(rt, args.issue.strip(), queries.ISSUE_TEAM)
    _in_team(issue, args.team.strip())
    team_id = str((issue.get("team") or {}).get("id"))
    data = await _call(
        "reading workflow states", graphql(rt.settings, queries.WORKFLOW_STATES, {"teamId": team_id})
    )
    states = (data.get("workflowStates") or {}).get("nodes") or []
    wanted = args.state.strip().lower()
    state = next((s for s in states if wanted in (str(s.get("name", "")).lower(), str(s.get("id")))), None)
    if state is None:
        names = ", ".join(str(s.get("name")) for s in states) or "none"
        raise ToolError(
            ToolErrorKind.INVALID, f"team {args.team} has no state {args.state!r}; states: {names}"
        )
    variables = {"id": issue["id"], "input": {"stateId": state["id"]}}
    await _call(f"moving {issue.get('identifier')}", graphql(rt.settings, queries.ISSUE_UPDATE, variables))
    return f"Moved {issue.get('identifier')} to {state.get('name')}"
