"""Discord roles among an agent's approvers, resolved to the people who hold them now.

`approvals.approvers` may name Discord people as `discord:<user id>` (kept as they are: a click
carries that identity) and roles as `discord:role:<role id or name>`, resolved here to
`discord:<user id>` of each member holding the role in the servers the bot is in, the way a
Slack user group is resolved to its members. Listing members needs the bot's Server Members
intent (Discord's developer portal); without it the role resolves to nobody and is reported.
"""

from __future__ import annotations

from typing import Any

from activities.discord.client import discord_call
from activities.discord.messages import PREFIX, ROLE_PREFIX
from config.settings import Settings

MEMBERS_PAGE = 1000  # Discord's largest page of guild members


def is_discord_role(entry: str) -> bool:
    return entry.startswith(ROLE_PREFIX)


async def role_members(settings: Settings, entry: str) -> list[str]:
    """`discord:<id>` of everyone holding the role `entry` names, in every server of the bot."""
    wanted = entry[len(ROLE_PREFIX) :].strip().removeprefix("@").lower()
    found: list[str] = []
    for guild in await discord_call(settings, "GET", "/users/@me/guilds") or []:
        guild_id = str(guild["id"])
        roles = await discord_call(settings, "GET", "/guilds/{guild_id}/roles", guild_id=guild_id) or []
        ids = {
            str(r["id"]) for r in roles if str(r["id"]) == wanted or str(r.get("name", "")).lower() == wanted
        }
        if ids:
            found += [PREFIX + m for m in await _members_with(settings, guild_id, ids)]
    return list(dict.fromkeys(found))


async def _members_with(settings: Settings, guild_id: str, role_ids: set[str]) -> list[str]:
    holders: list[str] = []
    after = "0"
    while True:
        page: list[dict[str, Any]] = (
            await discord_call(
                settings,
                "GET",
                "/guilds/{guild_id}/members?limit=" + f"{MEMBERS_PAGE}&after={after}",
                guild_id=guild_id,
            )
            or []
        )
        holders += [str(m["user"]["id"]) for m in page if role_ids & {str(r) for r in m.get("roles") or []}]
        if len(page) < MEMBERS_PAGE:
            return holders
        after = str(page[-1]["user"]["id"])
