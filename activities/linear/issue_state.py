"""An issue delegated to the agent shows that work began: Linear asks agents to move an issue
that is not yet started (triage, backlog, unstarted) to its team's first "started" state when
they begin, and to leave alone one that is started, done or cancelled.
"""

from __future__ import annotations

from typing import Any

from activities.linear import queries
from activities.linear.client import graphql
from config.settings import Settings

NOT_YET_STARTED = frozenset({"triage", "backlog", "unstarted"})


async def move_to_started(settings: Settings, issue_id: str) -> str | None:
    """Move the issue to its team's first started state; the state's name, or None when the
    issue was left as it was (already started, done or cancelled, or no started state)."""
    issue: dict[str, Any] = (await graphql(settings, queries.ISSUE_STATE, {"id": issue_id})).get(
        "issue"
    ) or {}
    if (issue.get("state") or {}).get("type") not in NOT_YET_STARTED:
        return None
    team_id = (issue.get("team") or {}).get("id")
    data = await graphql(settings, queries.WORKFLOW_STATES, {"teamId": team_id})
    states = (data.get("workflowStates") or {}).get("nodes") or []
    started = sorted((s for s in states if s.get("type") == "started"), key=lambda s: s.get("position") or 0)
    if not started:
        return None
    await graphql(settings, queries.ISSUE_UPDATE, {"id": issue["id"], "input": {"stateId": started[0]["id"]}})
    return str(started[0].get("name"))
