"""The fake Discord's REST routes (below /api/v10) for users, guilds, channels, messages,
threads, reactions and application commands.

Errors are Discord's JSON errors (`discord_wire.py`), so a client's error handling meets what it
will meet in production. Authentication, rate-limit headers and the call log are the server's
middleware (`discord_api.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.fakes.discord_objects import ALICE_ID, BOT_ID, GUILD_ID, GUILD_NAME, message, snowflake, thread
from tests.fakes.discord_wire import (
    BODY,
    MAX_CONTENT,
    Handler,
    apply_edit,
    check_message_body,
    error,
    invalid_form,
    mentions,
    reply,
    unknown,
)

if TYPE_CHECKING:
    from tests.fakes.discord_api import FakeDiscord

HAS_THREAD = 1 << 5


class Rest:
    def __init__(self, fake: FakeDiscord) -> None:
        self._fake = fake

    def routes(self) -> list[tuple[str, str, Handler]]:
        channel, msg = "/channels/{channel_id}", "/channels/{channel_id}/messages/{message_id}"
        return [
            ("GET", "/users/@me", self.me),
            ("GET", "/users/@me/guilds", self.my_guilds),
            ("GET", "/applications/@me", self.application),
            ("GET", "/users/{user_id}", self.user),
            ("GET", "/oauth2/applications/@me", self.application),
            ("GET", "/gateway", self.gateway),
            ("GET", "/gateway/bot", self.gateway),
            ("GET", channel, self.channel),
            ("GET", "/guilds/{guild_id}/channels", self.guild_channels),
            ("GET", "/guilds/{guild_id}/roles", self.guild_roles),
            ("GET", "/guilds/{guild_id}/members", self.guild_members),
            ("GET", "/guilds/{guild_id}/members/{user_id}", self.guild_member),
            ("POST", channel + "/messages", self.post_message),
            ("GET", channel + "/messages", self.list_messages),
            ("GET", msg, self.get_message),
            ("PATCH", msg, self.edit_message),
            ("DELETE", msg, self.delete_message),
            ("DELETE", channel, self.delete_channel),
            ("POST", msg + "/threads", self.thread_from_message),
            ("POST", channel + "/threads", self.thread_without_message),
            ("PUT", msg + "/reactions/{emoji}/@me", self.react),
            ("POST", channel + "/typing", self.typing),
            ("PUT", "/applications/{application_id}/commands", self.put_commands),
            ("PUT", "/applications/{application_id}/guilds/{guild_id}/commands", self.put_commands),
        ]

    # Users, application, gateway -----------------------------------------------------------

    async def me(self, request: web.Request) -> web.Response:
        return reply(self._fake.world.bot)

    async def my_guilds(self, request: web.Request) -> web.Response:
        """The servers the bot is in, as partial guilds."""
        return reply([{"id": GUILD_ID, "name": GUILD_NAME, "icon": None, "owner": False, "permissions": "0"}])

    async def user(self, request: web.Request) -> web.Response:
        found = self._fake.world.users.get(request.match_info["user_id"])
        return reply(found) if found else unknown("User")

    async def application(self, request: web.Request) -> web.Response:
        world = self._fake.world
        return reply(
            {
                "id": self._fake.application_id,
                "name": world.bot["username"],
                "icon": None,
                "description": "",
                "summary": "",
                "type": None,
                "bot": world.bot,
                "bot_public": False,
                "bot_require_code_grant": False,
                "verify_key": self._fake.public_key,
                "owner": world.users[ALICE_ID],
                "team": None,
                "flags": 0,
                "tags": [],
                "redirect_uris": [],
                "interactions_endpoint_url": None,
                "approximate_guild_count": 1,
            }
        )

    async def gateway(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = {"url": self._fake.gateway_url}
        if request.path.endswith("/bot"):
            limit = {"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}
            body.update(shards=1, session_start_limit=limit)
        return reply(body)

    # Guild ---------------------------------------------------------------------------------

    def _guild(self, request: web.Request) -> bool:
        return request.match_info["guild_id"] == GUILD_ID

    async def channel(self, request: web.Request) -> web.Response:
        with self._fake.lock:
            found = self._fake.world.channel(request.match_info["channel_id"])
            return reply(found) if found else unknown("Channel")

    async def guild_channels(self, request: web.Request) -> web.Response:
        with self._fake.lock:
            return (
                reply(list(self._fake.world.channels.values())) if self._guild(request) else unknown("Guild")
            )

    async def guild_roles(self, request: web.Request) -> web.Response:
        return reply(self._fake.world.roles) if self._guild(request) else unknown("Guild")

    async def guild_members(self, request: web.Request) -> web.Response:
        if not self._guild(request):
            return unknown("Guild")
        limit, after = request.query.get("limit", "1"), request.query.get("after", "0")
        if not limit.isdigit() or not 1 <= int(limit) <= 1000 or not after.isdigit():
            return invalid_form("limit", "NUMBER_TYPE_MAX", "limit must be 1-1000, after a user id")
        with self._fake.lock:
            everyone = sorted(self._fake.world.members.values(), key=lambda m: int(m["user"]["id"]))
        return reply([m for m in everyone if int(m["user"]["id"]) > int(after)][: int(limit)])

    async def guild_member(self, request: web.Request) -> web.Response:
        found = self._fake.world.members.get(request.match_info["user_id"])
        if not self._guild(request):
            return unknown("Guild")
        return reply(found) if found else unknown("Member")

    # Messages ------------------------------------------------------------------------------

    async def post_message(self, request: web.Request) -> web.Response:
        fake, channel_id, body = self._fake, request.match_info["channel_id"], request[BODY]
        refused = check_message_body(body)
        if refused is not None:
            return refused
        with fake.lock:
            if fake.world.channel(channel_id) is None:
                return unknown("Channel")
            content = str(body.get("content") or "")
            fields: dict[str, Any] = {
                key: body[key]
                for key in ("embeds", "components", "flags", "nonce")
                if body.get(key) is not None
            }
            fields["mentions"] = mentions(fake.world.users, content, body.get("allowed_mentions"))
            reference = body.get("message_reference")
            if isinstance(reference, dict):
                quoted = fake.world.find_message(
                    reference.get("channel_id") or channel_id, str(reference["message_id"])
                )
                if quoted is None:
                    return invalid_form("message_reference", "REPLIES_UNKNOWN_MESSAGE", "Unknown message")
                fields.update(type=19, message_reference=dict(reference, channel_id=channel_id))
                fields["referenced_message"] = quoted
            posted = fake.store_message(channel_id, message(channel_id, fake.world.bot, content, **fields))
        await fake.dispatch_message("MESSAGE_CREATE", posted)
        return reply(posted)

    async def list_messages(self, request: web.Request) -> web.Response:
        limit = request.query.get("limit", "50")
        if not limit.isdigit() or not 1 <= int(limit) <= 100:
            return invalid_form("limit", "NUMBER_TYPE_MAX", "Must be between 1 and 100.")
        before, after = request.query.get("before"), request.query.get("after")
        with self._fake.lock:
            if self._fake.world.channel(request.match_info["channel_id"]) is None:
                return unknown("Channel")
            shown = list(self._fake.world.messages.get(request.match_info["channel_id"], []))
        shown = [m for m in shown if (not before or int(m["id"]) < int(before))]
        shown = [m for m in shown if (not after or int(m["id"]) > int(after))]
        newest_first = sorted(shown, key=lambda m: int(m["id"]), reverse=True)
        return reply(newest_first[: int(limit)])

    async def get_message(self, request: web.Request) -> web.Response:
        with self._fake.lock:
            found = self._fake.world.find_message(
                request.match_info["channel_id"], request.match_info["message_id"]
            )
            return reply(found) if found else unknown("Message")

    async def edit_message(self, request: web.Request) -> web.Response:
        fake, body = self._fake, request[BODY] or {}
        if len(str(body.get("content") or "")) > MAX_CONTENT:
            return invalid_form(
                "content", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_CONTENT} or fewer in length."
            )
        with fake.lock:
            found = fake.world.find_message(
                request.match_info["channel_id"], request.match_info["message_id"]
            )
            if found is None:
                return unknown("Message")
            if found["author"]["id"] != BOT_ID:
                return error(403, 50005, "Cannot edit a message authored by another user")
            apply_edit(fake.world.users, found, body)
        await fake.dispatch_message("MESSAGE_UPDATE", found)
        return reply(found)

    async def delete_message(self, request: web.Request) -> web.Response:
        info, world = request.match_info, self._fake.world
        with self._fake.lock:
            kept = world.messages.get(info["channel_id"], [])
            world.messages[info["channel_id"]] = [m for m in kept if m["id"] != info["message_id"]]
            gone = len(kept) != len(world.messages[info["channel_id"]])
        return reply(None) if gone else unknown("Message")

    async def delete_channel(self, request: web.Request) -> web.Response:
        """Deleting a thread (the only channels a bot here deletes) takes its messages along."""
        with self._fake.lock:
            found = self._fake.world.channel(request.match_info["channel_id"])
            if found is None or found["type"] not in (10, 11, 12):
                return unknown("Channel")
            self._fake.world.threads.pop(found["id"], None)
            self._fake.world.messages.pop(found["id"], None)
        return reply(found)

    async def react(self, request: web.Request) -> web.Response:
        fake, info = self._fake, request.match_info
        with fake.lock:
            found = fake.world.find_message(info["channel_id"], info["message_id"])
            if found is None:
                return unknown("Message")
            emojis = fake.reactions.setdefault((info["channel_id"], info["message_id"]), [])
            if info["emoji"] not in emojis:
                emojis.append(info["emoji"])
                found.setdefault("reactions", []).append(
                    {"emoji": {"id": None, "name": info["emoji"]}, "count": 1, "me": True, "burst_colors": []}
                )
        return reply(None)

    async def typing(self, request: web.Request) -> web.Response:
        with self._fake.lock:
            if self._fake.world.channel(request.match_info["channel_id"]) is None:
                return unknown("Channel")
            self._fake.typing.append(request.match_info["channel_id"])
        return reply(None)

    # Threads -------------------------------------------------------------------------------

    async def thread_from_message(self, request: web.Request) -> web.Response:
        fake, info, body = self._fake, request.match_info, request[BODY] or {}
        if not body.get("name"):
            return invalid_form("name", "BASE_TYPE_REQUIRED", "This field is required")
        with fake.lock:
            starter = fake.world.find_message(info["channel_id"], info["message_id"])
            if starter is None:
                return unknown("Message")
            if info["message_id"] in fake.world.threads:
                return error(400, 160004, "A thread has already been created for this message")
            # A thread started from a message takes the message's id.
            made = thread(info["message_id"], info["channel_id"], BOT_ID, body["name"], _minutes(body))
            fake.world.threads[made["id"]] = made
            starter["flags"] = starter.get("flags", 0) | HAS_THREAD
            starter["thread"] = made
        await fake.gateway.dispatch("THREAD_CREATE", dict(made, newly_created=True))
        return reply(made, 201)

    async def thread_without_message(self, request: web.Request) -> web.Response:
        fake, body = self._fake, request[BODY] or {}
        if not body.get("name"):
            return invalid_form("name", "BASE_TYPE_REQUIRED", "This field is required")
        with fake.lock:
            if request.match_info["channel_id"] not in fake.world.channels:
                return unknown("Channel")
            made = thread(snowflake(), request.match_info["channel_id"], BOT_ID, body["name"], _minutes(body))
            made["type"] = int(body.get("type") or 12)  # Discord's default is a private thread
            fake.world.threads[made["id"]] = made
        await fake.gateway.dispatch("THREAD_CREATE", dict(made, newly_created=True))
        return reply(made, 201)

    # Application commands ------------------------------------------------------------------

    async def put_commands(self, request: web.Request) -> web.Response:
        fake, info, body = self._fake, request.match_info, request[BODY]
        if info["application_id"] != fake.application_id:
            return error(403, 50001, "Missing Access")
        if not isinstance(body, list):
            return error(400, 50109, "The request body contains invalid JSON.")
        guild_id = info.get("guild_id")
        with fake.lock:
            before = {c["name"]: c["id"] for c in fake.commands.get(guild_id, [])}
            stored = [
                {
                    "type": 1,
                    "options": [],
                    "default_member_permissions": None,
                    "nsfw": False,
                    **command,
                    # Discord keeps a command's id when a bulk overwrite keeps its name.
                    "id": before.get(command.get("name", ""), snowflake()),
                    "application_id": fake.application_id,
                    "version": snowflake(),
                    **({"guild_id": guild_id} if guild_id else {}),
                }
                for command in body
            ]
            fake.commands[guild_id] = stored
        return reply(stored)


def _minutes(body: dict[str, Any]) -> int:
    return int(body.get("auto_archive_duration") or 1440)
