"""Slack names in an agent (`#channel`, `@handle`, `@group`) turned into the ids Slack sends.

Events and button clicks carry ids (C0123, U0456), so an agent is stored with ids: `openloop
agents apply` resolves every name here first. Where a name may stand:

- `spec.surfaces.slack.channels` and a tool's `limit_to`: `#channel`
- `spec.surfaces.slack.triggers.users`: `@handle`; `triggers.usergroups`: `@group`
- `spec.approvals.approvers`: `@handle`, or `@group` for each of its members at apply time

Each directory (channels, users, user groups) is read once per `SlackNames`, every page, and
then answered from memory, so applying a folder of agents costs three listings. A name that
does not exist is a `NameProblem` saying where it stands and what to do. Ids and other values
(`cli:local`) pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from config.agent import AgentConfig

__all__ = ["NameProblem", "SlackNames", "names_in", "resolve_names"]

PAGE_SIZE = 200  # Slack's recommended page size for list methods

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class NameProblem:
    loc: Loc  # where the name stands in the agent (today's form)
    name: str
    message: str


class SlackNames:
    """Channel, user and user-group names of one workspace, each listing read once."""

    def __init__(self, client: AsyncWebClient):
        self._client = client
        self._channels: dict[str, str] | None = None
        self._users: dict[str, str] | None = None
        self._groups: dict[str, tuple[str, list[str]]] | None = None

    async def channel(self, name: str) -> str | None:
        if self._channels is None:
            self._channels = {}
            first = await self._client.conversations_list(
                types="public_channel,private_channel", exclude_archived=True, limit=PAGE_SIZE
            )
            async for page in first:
                for channel in page.get("channels") or []:
                    self._channels.setdefault(str(channel["name"]), str(channel["id"]))
        return self._channels.get(name)

    async def user(self, handle: str) -> str | None:
        if self._users is None:
            self._users = {}
            display: dict[str, str] = {}
            async for page in await self._client.users_list(limit=PAGE_SIZE):
                for user in page.get("members") or []:
                    if user.get("deleted"):
                        continue
                    self._users.setdefault(str(user["name"]), str(user["id"]))
                    shown = (user.get("profile") or {}).get("display_name")
                    if shown:
                        display.setdefault(str(shown), str(user["id"]))
            # A handle (`name`) wins over a display name someone else chose.
            self._users = {**display, **self._users}
        return self._users.get(handle)

    async def group(self, handle: str) -> tuple[str, list[str]] | None:
        """The user group's id and members."""
        if self._groups is None:
            # usergroups.list answers in one page (a workspace has few groups).
            response = await self._client.usergroups_list(include_users=True)
            self._groups = {
                str(g["handle"]): (str(g["id"]), [str(u) for u in g.get("users") or []])
                for g in response.get("usergroups") or []
                if not g.get("date_delete")
            }
        return self._groups.get(handle)


def _places(data: dict[str, Any]) -> list[tuple[Loc, list[Any], str]]:
    """Each list of the agent that may hold names: (its place, the list, the kind of name)."""
    spec = data["spec"]
    slack = spec["surfaces"].get("slack") or {}
    triggers = slack.get("triggers") or {}
    places: list[tuple[Loc, list[Any], str]] = [
        (("spec", "surfaces", "slack", "channels"), slack.get("channels") or [], "channel"),
        (("spec", "surfaces", "slack", "triggers", "users"), triggers.get("users") or [], "user"),
        (("spec", "surfaces", "slack", "triggers", "usergroups"), triggers.get("usergroups") or [], "group"),
        (("spec", "approvals", "approvers"), spec["approvals"]["approvers"], "approver"),
    ]
    for index, tool in enumerate(spec["tools"]):
        if str(tool["name"]).startswith("slack."):
            places.append((("spec", "tools", index, "limit_to"), tool["limit_to"], "channel"))
    return places


def _is_name(value: Any, kind: str) -> bool:
    return isinstance(value, str) and value.startswith("#" if kind == "channel" else "@")


def names_in(config: AgentConfig) -> list[str]:
    """The Slack names in an agent that `resolve_names` would look up."""
    data = config.model_dump(mode="json")
    return [str(v) for _, values, kind in _places(data) for v in values if _is_name(v, kind)]


_ADVICE: dict[str, Callable[[str], str]] = {
    "channel": lambda n: (
        f"no Slack channel named {n} that the bot can see (archived, or private without "
        "the bot invited); check the name, or write its id"
    ),
    "user": lambda n: f"no Slack user with the handle {n}; check the name, or write the user id (U…)",
    "group": lambda n: f"no Slack user group with the handle {n}; check the name, or write its id (S…)",
    "approver": lambda n: (
        f"no Slack user or user group with the handle {n}; check the name, or write the user id (U…)"
    ),
}


async def resolve_names(config: AgentConfig, names: SlackNames) -> tuple[AgentConfig, list[NameProblem]]:
    """The agent with every Slack name replaced by its id(s), or the names that do not exist."""
    data = config.model_dump(mode="json")
    problems: list[NameProblem] = []
    for loc, values, kind in _places(data):
        resolved: list[str] = []
        for position, value in enumerate(values):
            if not _is_name(value, kind):
                resolved.append(value)
                continue
            found = await _lookup(names, kind, value[1:])
            if found is None:
                problems.append(NameProblem((*loc, position), value, _ADVICE[kind](value)))
            resolved += found or []
        values[:] = list(dict.fromkeys(resolved))
    if problems:
        return config, problems
    return AgentConfig.model_validate(data), []


async def _lookup(names: SlackNames, kind: str, name: str) -> list[str] | None:
    if kind == "channel":
        channel = await names.channel(name)
        return [channel] if channel else None
    if kind == "user" or kind == "approver":
        user = await names.user(name)
        if user is not None or kind == "user":
            return [user] if user else None
        group = await names.group(name)
        # An approver group stands for its members now: a later change needs a new apply.
        return group[1] if group else None
    group = await names.group(name)
    return [group[0]] if group else None
