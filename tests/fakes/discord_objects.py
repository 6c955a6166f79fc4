"""The fake Discord's world: one guild, its channels, roles and members, as Discord's JSON.

Ids are strings (Discord sends snowflakes as strings). Objects follow the shapes documented in
Discord's API reference (user, guild member, role, channel, thread, message, guild), because the
real discord.py client builds its cache from them and fails on a missing key. Pure functions and
constants only; the server lives in `discord_api.py`.
"""

from __future__ import annotations

import itertools
import threading
import time
from datetime import UTC, datetime
from typing import Any

APPLICATION_ID = "1100000000000000001"
BOT_ID = "1100000000000000002"
BOT_NAME = "openloop"
GUILD_ID = "1200000000000000001"
GUILD_NAME = "acme"
ENG_CHANNEL_ID = "1200000000000000010"
PLATFORM_CHANNEL_ID = "1200000000000000011"
EVERYONE_ROLE_ID = GUILD_ID  # Discord gives @everyone the guild's own id
MAINTAINERS_ROLE_ID = "1200000000000000020"
ALICE_ID = "1300000000000000001"
BOB_ID = "1300000000000000002"
MIA_ID = "1300000000000000003"

# Permission bits (Discord's documented values), sent as decimal strings.
VIEW_CHANNEL, SEND_MESSAGES, READ_MESSAGE_HISTORY = 1 << 10, 1 << 11, 1 << 16
ADD_REACTIONS, EMBED_LINKS, SEND_MESSAGES_IN_THREADS = 1 << 6, 1 << 14, 1 << 38
CREATE_PUBLIC_THREADS, MANAGE_MESSAGES = 1 << 35, 1 << 13
MEMBER_PERMISSIONS = (
    VIEW_CHANNEL | SEND_MESSAGES | READ_MESSAGE_HISTORY | ADD_REACTIONS | EMBED_LINKS
    | SEND_MESSAGES_IN_THREADS | CREATE_PUBLIC_THREADS
)  # fmt: skip
MAINTAINER_PERMISSIONS = MEMBER_PERMISSIONS | MANAGE_MESSAGES

# Message flags and gateway intents used by the fake.
EPHEMERAL = 1 << 6
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_MESSAGE_CONTENT = 1 << 15

_DISCORD_EPOCH_MS = 1420070400000
_counter = itertools.count(1)
_counter_lock = threading.Lock()


def snowflake() -> str:
    """A new id in Discord's layout (milliseconds since 2015 in the high bits), increasing."""
    with _counter_lock:
        increment = next(_counter) & 0xFFF
    return str(((int(time.time() * 1000) - _DISCORD_EPOCH_MS) << 22) | (1 << 17) | increment)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def user(user_id: str, username: str, *, bot: bool = False) -> dict[str, Any]:
    shown = {
        "id": user_id,
        "username": username,
        "discriminator": "0",
        "global_name": None if bot else username.capitalize(),
        "avatar": None,
        "public_flags": 0,
        "flags": 0,
        "banner": None,
        "accent_color": None,
        "avatar_decoration_data": None,
    }
    if bot:
        shown.update(bot=True, verified=True, mfa_enabled=False)
    return shown


def role(role_id: str, name: str, position: int, permissions: int) -> dict[str, Any]:
    return {
        "id": role_id,
        "name": name,
        "color": 0,
        "hoist": False,
        "icon": None,
        "unicode_emoji": None,
        "position": position,
        "permissions": str(permissions),
        "managed": False,
        "mentionable": position > 0,
        "flags": 0,
    }


def member(account: dict[str, Any], roles: list[str], joined_at: str) -> dict[str, Any]:
    return {
        "user": account,
        "nick": None,
        "avatar": None,
        "roles": list(roles),
        "joined_at": joined_at,
        "premium_since": None,
        "deaf": False,
        "mute": False,
        "flags": 0,
        "pending": False,
        "communication_disabled_until": None,
    }


def text_channel(channel_id: str, name: str, position: int) -> dict[str, Any]:
    return {
        "id": channel_id,
        "type": 0,
        "guild_id": GUILD_ID,
        "name": name,
        "position": position,
        "permission_overwrites": [],
        "topic": None,
        "nsfw": False,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "parent_id": None,
        "flags": 0,
    }


def thread(thread_id: str, parent_id: str, owner_id: str, name: str, minutes: int) -> dict[str, Any]:
    created = now_iso()
    return {
        "id": thread_id,
        "type": 11,  # PUBLIC_THREAD
        "guild_id": GUILD_ID,
        "parent_id": parent_id,
        "owner_id": owner_id,
        "name": name,
        "last_message_id": None,
        "message_count": 0,
        "member_count": 1,
        "total_message_sent": 0,
        "rate_limit_per_user": 0,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": minutes,
            "archive_timestamp": created,
            "locked": False,
            "create_timestamp": created,
        },
    }


def message(channel_id: str, author: dict[str, Any], content: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": snowflake(),
        "channel_id": channel_id,
        "type": 0,
        "author": author,
        "content": content,
        "timestamp": now_iso(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "components": [],
        "pinned": False,
        "flags": 0,
        **fields,
    }


class World:
    """The guild as Discord knows it; the server holds one and changes it under its lock."""

    def __init__(self) -> None:
        joined = "2025-01-06T09:00:00.000000+00:00"
        self.bot = user(BOT_ID, BOT_NAME, bot=True)
        self.users = {
            BOT_ID: self.bot,
            ALICE_ID: user(ALICE_ID, "alice"),
            BOB_ID: user(BOB_ID, "bob"),
            MIA_ID: user(MIA_ID, "mia"),
        }
        maintainers = [MAINTAINERS_ROLE_ID]
        roles_of = {BOT_ID: [], ALICE_ID: [], BOB_ID: maintainers, MIA_ID: maintainers}
        self.members = {uid: member(self.users[uid], roles_of[uid], joined) for uid in self.users}
        self.roles = [
            role(EVERYONE_ROLE_ID, "@everyone", 0, MEMBER_PERMISSIONS),
            role(MAINTAINERS_ROLE_ID, "maintainers", 1, MAINTAINER_PERMISSIONS),
        ]
        self.channels: dict[str, dict[str, Any]] = {
            ENG_CHANNEL_ID: text_channel(ENG_CHANNEL_ID, "eng", 0),
            PLATFORM_CHANNEL_ID: text_channel(PLATFORM_CHANNEL_ID, "platform", 1),
        }
        self.threads: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, list[dict[str, Any]]] = {}

    def permissions_of(self, user_id: str) -> int:
        granted = 0
        for shown in self.roles:
            if shown["id"] == EVERYONE_ROLE_ID or shown["id"] in self.members[user_id]["roles"]:
                granted |= int(shown["permissions"])
        return granted

    def channel(self, channel_id: str) -> dict[str, Any] | None:
        return self.channels.get(channel_id) or self.threads.get(channel_id)

    def guild_id_of(self, channel_id: str) -> str | None:
        return GUILD_ID if self.channel(channel_id) is not None else None

    def find_message(self, channel_id: str, message_id: str) -> dict[str, Any] | None:
        return next((m for m in self.messages.get(channel_id, []) if m["id"] == message_id), None)

    def guild_create(self) -> dict[str, Any]:
        """GUILD_CREATE's payload: the guild with everything discord.py caches."""
        return {
            "id": GUILD_ID,
            "name": GUILD_NAME,
            "icon": None,
            "splash": None,
            "discovery_splash": None,
            "banner": None,
            "description": None,
            "owner_id": ALICE_ID,
            "afk_channel_id": None,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 1,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
            "premium_tier": 0,
            "premium_subscription_count": 0,
            "premium_progress_bar_enabled": False,
            "preferred_locale": "en-US",
            "system_channel_id": ENG_CHANNEL_ID,
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "public_updates_channel_id": None,
            "vanity_url_code": None,
            "application_id": None,
            "features": [],
            "emojis": [],
            "stickers": [],
            "roles": self.roles,
            "joined_at": self.members[BOT_ID]["joined_at"],
            "large": False,
            "unavailable": False,
            # member_count equal to the members sent: discord.py then sees the guild as
            # chunked and does not ask for members (op 8) before on_ready.
            "member_count": len(self.members),
            "members": list(self.members.values()),
            "channels": [{k: v for k, v in c.items() if k != "guild_id"} for c in self.channels.values()],
            "threads": list(self.threads.values()),
            "presences": [],
            "voice_states": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }
