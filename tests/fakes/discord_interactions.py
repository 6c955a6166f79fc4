"""Signed interactions: the fake Discord calling an app's HTTP endpoint, and the app answering.

Outgoing: Discord signs `timestamp + body` with the application's Ed25519 key and sends the
signature (hex) in `X-Signature-Ed25519` and the timestamp (Unix seconds) in
`X-Signature-Timestamp`; the app verifies with the "Public Key" shown in the developer portal
(`public_key` here). The builders return interaction objects shaped as Discord documents them.

Incoming: the responses an app sends back over REST — the interaction callback (`?with_response=
true` returns the documented callback response), edits of `@original` and follow-ups — are
recorded in `responses`; messages they create land in the channel, except ephemeral ones
(flags 64), which only their user sees and which are kept in `ephemerals`.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import TYPE_CHECKING, Any

import httpx
from aiohttp import web
from nacl.signing import SigningKey

from tests.fakes.discord_objects import EPHEMERAL, GUILD_ID, message, snowflake
from tests.fakes.discord_wire import BODY, Handler, apply_edit, check_message_body, error, reply

if TYPE_CHECKING:
    from tests.fakes.discord_api import FakeDiscord

COMMAND_NAME = "openloop"
LOADING = 1 << 7  # the "is thinking..." message of a deferred response
STALE_SECONDS = 600
_WEBHOOK = "/webhooks/{application_id}/{token}"


class Interactions:
    def __init__(self, fake: FakeDiscord) -> None:
        self._fake = fake
        self._key = SigningKey.generate()
        self.issued: dict[str, dict[str, Any]] = {}  # token -> the interaction sent
        self.originals: dict[str, dict[str, Any]] = {}  # token -> the @original message
        self.responses: list[dict[str, Any]] = []
        self.ephemerals: list[dict[str, Any]] = []

    @property
    def public_key(self) -> str:
        return bytes(self._key.verify_key).hex()

    def sign(
        self, body: bytes, timestamp: str | None = None, key: SigningKey | None = None
    ) -> dict[str, str]:
        stamp = timestamp or str(int(time.time()))
        signature = (key or self._key).sign(stamp.encode() + body).signature.hex()
        return {"X-Signature-Ed25519": signature, "X-Signature-Timestamp": stamp}

    # Builders ------------------------------------------------------------------------------

    def ping(self) -> dict[str, Any]:
        return self._issue({"type": 1})

    def command(
        self, user_id: str, channel_id: str, subcommand: str, options: dict[str, str]
    ) -> dict[str, Any]:
        with self._fake.lock:
            registered = [
                c for cs in self._fake.commands.values() for c in cs if c.get("name") == COMMAND_NAME
            ]
        data = {
            "id": registered[0]["id"] if registered else "1100000000000000100",
            "name": COMMAND_NAME,
            "type": 1,  # CHAT_INPUT
            "guild_id": GUILD_ID,
            "options": [
                {
                    "type": 1,  # SUB_COMMAND
                    "name": subcommand,
                    "options": [{"type": 3, "name": k, "value": v} for k, v in options.items()],
                }
            ],
        }
        return self._issue(self._in_guild(user_id, channel_id, {"type": 2, "data": data}))

    def button(self, user_id: str, shown: dict[str, Any], custom_id: str) -> dict[str, Any]:
        data = {"custom_id": custom_id, "component_type": 2}
        payload = {"type": 3, "data": data, "message": shown}
        return self._issue(self._in_guild(user_id, shown["channel_id"], payload))

    def _in_guild(self, user_id: str, channel_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        world = self._fake.world
        with self._fake.lock:
            channel = world.channel(channel_id)
            if channel is None:
                raise KeyError(f"unknown channel {channel_id}: use a channel or thread of the fake")
            invoker = dict(world.members[user_id], permissions=str(world.permissions_of(user_id)))
            return {
                **payload,
                "guild_id": GUILD_ID,
                "guild": {"id": GUILD_ID, "locale": "en-US", "features": []},
                "channel_id": channel_id,
                "channel": dict(channel),
                "member": invoker,
                "app_permissions": str(world.permissions_of(user_id) | world.permissions_of(world.bot["id"])),
                "locale": "en-US",
                "guild_locale": "en-US",
                "entitlements": [],
                "authorizing_integration_owners": {"0": GUILD_ID},
                "context": 0,
                "attachment_size_limit": 10 * 1024 * 1024,
            }

    def _issue(self, payload: dict[str, Any]) -> dict[str, Any]:
        token = "aW50ZXJhY3Rpb246" + secrets.token_urlsafe(48)
        issued = {
            "id": snowflake(),
            "application_id": self._fake.application_id,
            "token": token,
            "version": 1,
        }
        issued.update(payload)
        with self._fake.lock:
            self.issued[token] = issued
        return issued

    # Delivery ------------------------------------------------------------------------------

    def deliver(
        self, url: str, payload: dict[str, Any], *, forge: bool = False, stale: bool = False
    ) -> httpx.Response:
        """POST an interaction as Discord does: compact JSON, signed (forge: by another key;
        stale: with a timestamp ten minutes old)."""
        body = json.dumps(payload, separators=(",", ":")).encode()
        stamp = str(int(time.time()) - STALE_SECONDS) if stale else None
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Discord-Interactions/1.0 (+https://discord.com)",
            **self.sign(body, stamp, SigningKey.generate() if forge else None),
        }
        answer = httpx.post(url, content=body, headers=headers, timeout=10)
        # The HTTP answer to a delivery is the interaction's response, as on Discord.
        issued = self.issued.get(str(payload.get("token")))
        if answer.status_code == 200 and issued is not None and payload.get("type") != 1:
            response = answer.json()
            if isinstance(response, dict) and response.get("type") in (4, 5, 6, 7):
                self._fake._run(self.acknowledge(issued, response))
        return answer

    # Responses (REST) ----------------------------------------------------------------------

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", "/interactions/{interaction_id}/{token}/callback", self.callback),
            ("PATCH", _WEBHOOK + "/messages/{message_id}", self.edit),
            ("GET", _WEBHOOK + "/messages/{message_id}", self.get),
            ("POST", _WEBHOOK, self.followup),
        ]

    async def callback(self, request: web.Request) -> web.Response:
        fake, token, body = self._fake, request.match_info["token"], request[BODY] or {}
        with fake.lock:
            issued = self.issued.get(token)
            if issued is None or issued["id"] != request.match_info["interaction_id"]:
                return error(404, 10062, "Unknown interaction")
            if any(r["token"] == token and r["kind"] == "callback" for r in self.responses):
                return error(400, 40060, "Interaction has already been acknowledged.")
            kind, data = int(body.get("type") or 0), body.get("data") or {}
            refused = check_message_body(data) if kind == 4 else None
            if refused is not None:
                return refused
        created = await self.acknowledge(issued, body)
        if request.query.get("with_response") != "true":
            return reply(None)
        summary: dict[str, Any] = {"id": issued["id"], "type": issued["type"]}
        resource: dict[str, Any] = {"type": kind}
        if created is not None:
            summary.update(
                response_message_id=created["id"],
                response_message_loading=bool(created["flags"] & LOADING),
                response_message_ephemeral=bool(created["flags"] & EPHEMERAL),
            )
            if kind in (4, 7):
                resource["message"] = created
        return reply({"interaction": summary, "resource": resource})

    async def acknowledge(self, issued: dict[str, Any], body: dict[str, Any]) -> dict[str, Any] | None:
        """An interaction response (the delivery's HTTP answer, or the callback route's body)."""
        kind, data = int(body.get("type") or 0), body.get("data") or {}
        with self._fake.lock:
            self.responses.append(
                {"kind": "callback", "interaction_id": issued["id"], "token": issued["token"], "type": kind}
                | {"data": data}
            )
            created = self._respond(issued, kind, data)
        if created is not None and not created["flags"] & EPHEMERAL:
            await self._fake.dispatch_message(
                "MESSAGE_CREATE" if kind in (4, 5) else "MESSAGE_UPDATE", created
            )
        return created

    def _respond(self, issued: dict[str, Any], kind: int, data: dict[str, Any]) -> dict[str, Any] | None:
        """What a callback type does (lock held): 4/5 post the original, 7 edits the message
        the component is on, 6 makes that message the original; others change nothing."""
        if "channel_id" not in issued:  # a PING is answered in the HTTP response, not here
            return None
        if kind in (4, 5):
            flags = int(data.get("flags") or 0) | (LOADING if kind == 5 else 0)
            text = str(data.get("content") or "") if kind == 4 else ""
            fields = {k: data[k] for k in ("embeds", "components") if kind == 4 and k in data}
            created = message(issued["channel_id"], self._fake.world.bot, text, flags=flags, **fields)
            created.update(webhook_id=self._fake.application_id, application_id=self._fake.application_id)
            created["interaction_metadata"] = {
                "id": issued["id"],
                "type": issued["type"],
                "user": issued["member"]["user"],
            }
            self._keep(created)
            self.originals[issued["token"]] = created
            return created
        if kind in (6, 7) and "message" in issued:
            shown = self._fake.world.find_message(issued["channel_id"], issued["message"]["id"])
            if shown is not None:
                self.originals[issued["token"]] = shown
                if kind == 7:
                    apply_edit(self._fake.world.users, shown, data)
                    return shown
        return None

    def _keep(self, created: dict[str, Any]) -> None:
        if created["flags"] & EPHEMERAL:
            self.ephemerals.append(created)
        else:
            self._fake.store_message(created["channel_id"], created)

    def _message_of(self, request: web.Request) -> dict[str, Any] | web.Response:
        token, wanted = request.match_info["token"], request.match_info["message_id"]
        if request.match_info["application_id"] != self._fake.application_id or token not in self.issued:
            return error(404, 10015, "Unknown Webhook")
        if wanted == "@original":
            found = self.originals.get(token)
        else:
            found = next((m for m in self._followups(token) if m["id"] == wanted), None)
        return found if found is not None else error(404, 10008, "Unknown Message")

    def _followups(self, token: str) -> list[dict[str, Any]]:
        return [r["message"] for r in self.responses if r["token"] == token and r["kind"] == "followup"]

    async def get(self, request: web.Request) -> web.Response:
        with self._fake.lock:
            found = self._message_of(request)
        return found if isinstance(found, web.Response) else reply(found)

    async def edit(self, request: web.Request) -> web.Response:
        body = request[BODY] or {}
        with self._fake.lock:
            found = self._message_of(request)
            if isinstance(found, web.Response):
                return found
            apply_edit(self._fake.world.users, found, body)
            found["flags"] = int(found.get("flags") or 0) & ~LOADING
            self.responses.append(
                {
                    "kind": "edit",
                    "token": request.match_info["token"],
                    "message_id": request.match_info["message_id"],
                    "data": body,
                }
            )
        if not found["flags"] & EPHEMERAL:
            await self._fake.dispatch_message("MESSAGE_UPDATE", found)
        return reply(found)

    async def followup(self, request: web.Request) -> web.Response:
        fake, token, body = self._fake, request.match_info["token"], request[BODY]
        refused = check_message_body(body)
        if refused is not None:
            return refused
        with fake.lock:
            issued = self.issued.get(token)
            if issued is None or request.match_info["application_id"] != fake.application_id:
                return error(404, 10015, "Unknown Webhook")
            fields = {k: body[k] for k in ("embeds", "components") if k in body}
            created = message(
                issued["channel_id"],
                fake.world.bot,
                str(body.get("content") or ""),
                flags=int(body.get("flags") or 0),
                webhook_id=fake.application_id,
                **fields,
            )
            self._keep(created)
            self.responses.append({"kind": "followup", "token": token, "data": body, "message": created})
        if not created["flags"] & EPHEMERAL:
            await fake.dispatch_message("MESSAGE_CREATE", created)
        return reply(created)
