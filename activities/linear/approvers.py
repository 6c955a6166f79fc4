"""Approvers named by Linear identity: `linear:<user id>` as is, `linear:<email>` resolved to
`linear:<user id>` through Linear's API (the id a prompt in a session carries). Run by the
approval's preparing activity (`activities.approval_activities`), like Slack's `@handles`."""

from __future__ import annotations

from activities.linear import queries
from activities.linear.client import LinearError, LinearNotConfigured, activity_error, graphql
from config.settings import Settings

PREFIX = "linear:"


def is_linear_email(entry: str) -> bool:
    return entry.startswith(PREFIX) and "@" in entry.removeprefix(PREFIX)


async def linear_user(settings: Settings, entry: str) -> list[str]:
    """The `linear:<user id>` an email approver stands for; none when Linear knows no such
    person (or is not configured: reported with the entries that stand for nobody)."""
    try:
        data = await graphql(settings, queries.USERS_BY_EMAIL, {"email": entry.removeprefix(PREFIX)})
    except LinearNotConfigured:
        return []
    except (LinearError, OSError) as exc:
        raise activity_error(exc, "reading the Linear approvers") from None
    nodes = (data.get("users") or {}).get("nodes") or []
    return [f"{PREFIX}{nodes[0]['id']}"] if nodes else []
