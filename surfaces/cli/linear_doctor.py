"""`openloop doctor`'s Linear check: agents bound to Linear teams have the credentials, and
Linear answers a `viewer` query with them (the token is valid and reaches the API)."""

from __future__ import annotations

from activities.linear import queries
from activities.linear.client import LinearError, LinearNotConfigured, graphql
from activities.store.agents import StoredAgent
from config.settings import Settings


async def linear_check(settings: Settings, agents: list[StoredAgent]) -> tuple[str, bool, str] | None:
    """(name, ok, detail), or None when no agent is bound to a Linear team."""
    teams = [t for a in agents if (linear := a.config.spec.surfaces.linear) for t in linear.teams]
    if not teams:
        return None
    missing = []
    if settings.linear_access_token is None and settings.linear_api_key is None:
        missing.append("LINEAR_ACCESS_TOKEN (the app's actor=app OAuth token) or LINEAR_API_KEY")
    if settings.linear_webhook_secret is None:
        missing.append("LINEAR_WEBHOOK_SECRET (from the app's webhook settings)")
    where = f"bound to {len(teams)} team(s)"
    if missing:
        return "linear", False, f"{where}: set {'; '.join(missing)}"
    try:
        viewer = (await graphql(settings, queries.VIEWER)).get("viewer") or {}
    except (LinearError, LinearNotConfigured, OSError) as exc:
        return "linear", False, f"{where}: {settings.linear_api_url} refused the viewer query: {exc}"
    return "linear", True, f"{where}, credentials set, signed in as {viewer.get('name') or viewer.get('id')}"
