"""Discord messages as the inbox keeps them, and who may ask an agent there (pure).

The Gateway hands us discord.py `Message` objects; what a task needs from one is recorded as a
plain `DiscordMessage` (ids as strings, the author's roles with their names for the trigger
rule), so a row in the inbox can be dispatched by any replica, after any restart.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from config.surfaces import DiscordSurface

PREFIX = "discord:"
DEFAULT_REQUEST = "Read this thread and help with it."
_MENTION = re.compile(r"<@!?(\d+)>")


@dataclass(frozen=True)
class DiscordMessage:
    message_id: str
    channel_id: str  # where it was posted: a channel, or a thread
    channel_name: str | None  # the channel's name (a thread's parent's)
    parent_id: str | None  # the thread's channel, when posted in a thread
    guild_id: str | None
    author_id: str
    author_name: str
    content: str
    mentions_bot: bool
    role_ids: list[str] = field(default_factory=list)
    role_names: list[str] = field(default_factory=list)

    @property
    def in_thread(self) -> bool:
        return self.parent_id is not None

    @property
    def channel(self) -> str:
        """The channel an agent is bound to: a thread's parent, or the channel itself."""
        return self.parent_id or self.channel_id

    @property
    def user(self) -> str:
        return PREFIX + self.author_id

    def as_payload(self) -> dict[str, Any]:
        return {"kind": "message", **asdict(self)}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> DiscordMessage:
        return cls(**{k: v for k, v in payload.items() if k != "kind"})


def request_text(content: str, bot_id: str | None = None) -> str:
    """What the person asked: the message without the bot's mention (recorded that way)."""
    text = _MENTION.sub(lambda m: "" if m[1] == bot_id else m[0], content) if bot_id else content
    return " ".join(text.split()) or DEFAULT_REQUEST


def may_trigger(surface: DiscordSurface, author_id: str, role_ids: list[str], role_names: list[str]) -> bool:
    """The agent's `triggers` rule: everyone, or a listed user, or someone with a listed role
    (by id or by name)."""
    triggers = surface.triggers
    if triggers.everyone and not triggers.users and not triggers.roles:
        return True
    if author_id in triggers.users:
        return True
    listed = {r.lower().removeprefix("@") for r in triggers.roles}
    return bool(listed & ({r.lower() for r in role_ids} | {n.lower() for n in role_names}))
