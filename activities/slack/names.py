"""Slack names in an agent (`#channel`, `@handle`, `@group`) turned into the ids Slack sends,
and the approvers of a request turned into the user ids that may decide it.

Events and button clicks carry ids (C0123, U0456), so an agent is stored with ids: `openloop
agents apply` resolves every name here first. Where a name may stand:

- `spec.surfaces.slack.channels` and a tool's `limit_to`: `#channel`
- `spec.surfaces.slack.triggers.users`: `@handle`; `triggers.usergroups`: `@group`
- `spec.approvals.approvers`: `@handle`, or `@group`, stored as the group's id (S…): who is in
  the group is read when an approval is requested (`resolve_approvers`), so a member added
  later may approve without a new apply

A `SlackNames` reads each directory (channels, users, user groups) with every page, then
answers from memory for a short time (`DIRECTORY_TTL_SECONDS`); a name it does not know
re-reads the listing (at most every `MISS_REFRESH_SECONDS`), so a channel created or a
person who joined a minute ago is found. A name that does not exist is a `NameProblem`
saying where it stands and what to do. Ids and other values (`cli:local`) pass through.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from activities.slack.client import bot_client, is_retryable
from config.agent import AgentConfig
from config.settings import Settings

__all__ = [
    "NameProblem",
    "ResolvedApprovers",
    "SlackNames",
    "directory",
    "names_in",
    "resolve_approvers",
    "resolve_names",
]

PAGE_SIZE = 200  # Slack's recommended page size for list methods
DIRECTORY_TTL_SECONDS = 60.0  # how long a listing or a group's members are trusted
MISS_REFRESH_SECONDS = 5.0  # an unknown name re-reads its listing at most this often

USER_ID = re.compile(r"^[UW][A-Z0-9_]{2,}$")
GROUP_ID = re.compile(r"^S[A-Z0-9_]{2,}$")

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class NameProblem:
    loc: Loc  # where the name stands in the agent (today's form)
    name: str
    message: str


@dataclass
class _Listing:
    """One directory listing (name -> value) and when it was read."""

    values: dict[str, Any] = field(default_factory=dict)
    read_at: float | None = None


class SlackNames:
    """Channel, user and user-group names of one workspace, and user groups' members."""

    def __init__(
        self,
        client: AsyncWebClient,
        ttl: float = DIRECTORY_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._client = client
        self._ttl = ttl
        self._clock = clock
        self._channels = _Listing()
        self._users = _Listing()
        self._groups = _Listing()
        self._members: dict[str, tuple[float, list[str] | None]] = {}

    async def _find(self, listing: _Listing, read: Callable[[], Awaitable[dict[str, Any]]], key: str) -> Any:
        now = self._clock()
        age = None if listing.read_at is None else now - listing.read_at
        if age is None or age > self._ttl or (key not in listing.values and age >= MISS_REFRESH_SECONDS):
            listing.values, listing.read_at = await read(), now
        return listing.values.get(key)

    def forget_channels(self) -> None:
        """A channel was renamed: read the channel listing again at the next lookup."""
        self._channels.read_at = None

    async def channel(self, name: str) -> str | None:
        found = await self._find(self._channels, self._read_channels, name)
        return str(found) if found else None

    async def channel_name(self, channel_id: str) -> str | None:
        """The channel's current name (from the same listing)."""
        await self._find(self._channels, self._read_channels, "")
        return next((n for n, i in self._channels.values.items() if i == channel_id), None)

    async def user(self, handle: str) -> str | None:
        found = await self._find(self._users, self._read_users, handle)
        return str(found) if found else None

    async def group(self, handle: str) -> tuple[str, list[str]] | None:
        """The user group's id and members."""
        found = await self._find(self._groups, self._read_groups, handle)
        return (found[0], list(found[1])) if found else None

    async def members(self, group_id: str) -> list[str] | None:
        """The user group's members now (usergroups.users.list), None when there is no such group."""
        now = self._clock()
        cached = self._members.get(group_id)
        if cached is not None and now - cached[0] <= self._ttl:
            return cached[1]
        try:
            response = await self._client.usergroups_users_list(usergroup=group_id)
            users: list[str] | None = [str(u) for u in response.get("users") or []]
        except SlackApiError as exc:
            if is_retryable(exc):
                raise
            users = None  # no_such_subteam, or a group we may not read: it admits nobody
        self._members[group_id] = (now, users)
        return users

    async def _read_channels(self) -> dict[str, Any]:
        channels: dict[str, Any] = {}
        first = await self._client.conversations_list(
            types="public_channel,private_channel", exclude_archived=True, limit=PAGE_SIZE
        )
        async for page in first:
            for channel in page.get("channels") or []:
                channels.setdefault(str(channel["name"]), str(channel["id"]))
        return channels

    async def _read_users(self) -> dict[str, Any]:
        users: dict[str, Any] = {}
        display: dict[str, Any] = {}
        async for page in await self._client.users_list(limit=PAGE_SIZE):
            for user in page.get("members") or []:
                if user.get("deleted"):
                    continue
                users.setdefault(str(user["name"]), str(user["id"]))
                shown = (user.get("profile") or {}).get("display_name")
                if shown:
                    display.setdefault(str(shown), str(user["id"]))
        # A handle (`name`) wins over a display name someone else chose.
        return {**display, **users}

    async def _read_groups(self) -> dict[str, Any]:
        # usergroups.list answers in one page (a workspace has few groups).
        response = await self._client.usergroups_list(include_users=True)
        return {
            str(g["handle"]): (str(g["id"]), [str(u) for u in g.get("users") or []])
            for g in response.get("usergroups") or []
            if not g.get("date_delete")
        }


_DIRECTORIES: dict[tuple[str, str], SlackNames] = {}


def directory(settings: Settings) -> SlackNames:
    """The process's directory for this workspace (one per bot token and API URL), so every
    approval request and event shares one short-lived cache. Raises SlackNotConfigured."""
    client = bot_client(settings)
    key = (settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else "", client.base_url)
    if key not in _DIRECTORIES:
        _DIRECTORIES[key] = SlackNames(client)
    return _DIRECTORIES[key]


@dataclass(frozen=True)
class ResolvedApprovers:
    user_ids: list[str]  # who may decide, once each, in the order they were listed
    unresolved: list[str]  # listed entries that stand for nobody now


async def resolve_approvers(entries: list[str], names: SlackNames | None) -> ResolvedApprovers:
    """The user ids the approvers stand for now: a user id as is, a user group (`S…` or
    `@group`) as its members, `@handle` as its user; other identities (`cli:local`, a GitHub
    login) as they are. Without Slack (`names` None) only ids and other identities count."""
    ids: list[str] = []
    unresolved: list[str] = []
    for entry in entries:
        found = await _approver_ids(entry, names)
        if found:
            ids += found
        else:
            unresolved.append(entry)
    return ResolvedApprovers(list(dict.fromkeys(ids)), unresolved)


async def _approver_ids(entry: str, names: SlackNames | None) -> list[str] | None:
    if GROUP_ID.match(entry):
        return await names.members(entry) if names is not None else None
    if entry.startswith("@"):
        if names is None:
            return None
        user = await names.user(entry[1:])
        if user is not None:
            return [user]
        group = await names.group(entry[1:])
        return await names.members(group[0]) if group else None
    return [entry]


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
        # An approver group is kept as a group: its members are read when a request is made.
        return [group[0]] if group else None
    group = await names.group(name)
    return [group[0]] if group else None
