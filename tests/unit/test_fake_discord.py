"""The fake Discord is what the real clients meet: discord.py's Client logs in over REST and the
Gateway, hears a mention, replies through a 429, and resumes after a dropped socket; httpx sees
Discord's errors, pagination and rate-limit headers; interactions are signed as Discord signs
them and answered through the documented callback and webhook routes."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import discord
import httpx
import nacl.exceptions
import pytest
from aiohttp import ClientSession, WSMsgType
from discord.gateway import DiscordWebSocket
from nacl.signing import VerifyKey

from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_objects import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    ENG_CHANNEL_ID,
    GUILD_ID,
    INTENT_GUILD_MESSAGES,
    MAINTAINERS_ROLE_ID,
    MIA_ID,
    PLATFORM_CHANNEL_ID,
)

TOKEN = "fake-discord-bot-token"


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    with FakeDiscord(token=TOKEN) as server:
        yield server


@pytest.fixture
def api(fake: FakeDiscord) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.api_url, headers={"Authorization": f"Bot {TOKEN}"}) as client:
        yield client


class Bot(discord.Client):
    """discord.py's own Client, pointed at the fake, with what it hears in queues."""

    def __init__(self) -> None:
        intents = discord.Intents.default()
        intents.message_content = intents.members = True
        # guild_ready_timeout: on_ready waits this long after the last GUILD_CREATE (2 s by default).
        super().__init__(intents=intents, guild_ready_timeout=0.05)
        self.heard: asyncio.Queue[discord.Message] = asyncio.Queue()
        self.ready, self.resumed = asyncio.Event(), asyncio.Event()

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_resumed(self) -> None:
        self.resumed.set()

    async def on_message(self, message: discord.Message) -> None:
        await self.heard.put(message)


@pytest.fixture
async def bot(fake: FakeDiscord, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Bot]:
    monkeypatch.setattr(discord.http.Route, "BASE", fake.api_url)
    monkeypatch.setattr(DiscordWebSocket, "DEFAULT_GATEWAY", discord.gateway.yarl.URL(fake.gateway_url))
    client = Bot()
    running = asyncio.create_task(client.start(TOKEN))
    await asyncio.wait_for(client.ready.wait(), 5)
    yield client
    await client.close()
    await asyncio.wait_for(running, 5)


async def _next_from(bot: Bot, author_id: str) -> discord.Message:
    while True:
        message = await asyncio.wait_for(bot.heard.get(), 5)
        if str(message.author.id) == author_id:
            return message


async def test_discord_py_logs_in_hears_a_mention_and_replies_through_a_429(
    fake: FakeDiscord, bot: Bot
) -> None:
    assert bot.user is not None and str(bot.user.id) == BOT_ID
    guild = bot.get_guild(int(GUILD_ID))
    assert guild is not None and {c.name for c in guild.text_channels} == {"eng", "platform"}
    bob = guild.get_member(int(BOB_ID))
    assert bob is not None and [r.name for r in bob.roles] == ["@everyone", "maintainers"]
    assert fake.gateway.identifies[0]["intents"] == bot.intents.value
    assert fake.gateway.compressions == ["zlib-stream"]  # what discord.py asks for without zstandard

    await asyncio.to_thread(fake.say, ENG_CHANNEL_ID, ALICE_ID, "summarise #123", mention_bot=True)
    heard = await _next_from(bot, ALICE_ID)
    assert heard.content == f"<@{BOT_ID}> summarise #123"
    assert bot.user in heard.mentions and heard.channel.id == int(ENG_CHANNEL_ID)

    fake.rate_limit("POST", f"/channels/{ENG_CHANNEL_ID}/messages", times=1, retry_after=0.2)
    started = time.monotonic()
    sent = await heard.channel.send("On it.")
    assert time.monotonic() - started >= 0.2  # discord.py waited out retry_after, then retried
    posted = [c.status for c in fake.calls if c.path == f"/channels/{ENG_CHANNEL_ID}/messages"]
    assert posted == [429, 200]
    mine = [m for m in fake.messages(ENG_CHANNEL_ID) if m["author"]["id"] == BOT_ID]
    assert [(m["id"], m["content"]) for m in mine] == [(str(sent.id), "On it.")]
    echoed = await _next_from(bot, BOT_ID)  # Discord echoes a bot's own message to it
    assert echoed.id == sent.id


async def test_discord_py_resumes_after_a_dropped_socket_and_gets_what_it_missed(
    fake: FakeDiscord, bot: Bot
) -> None:
    await asyncio.to_thread(fake.drop_gateway)  # off the loop: the client must answer the close
    await asyncio.to_thread(fake.say, PLATFORM_CHANNEL_ID, MIA_ID, "while you were away")
    await asyncio.wait_for(bot.resumed.wait(), 5)
    missed = await _next_from(bot, MIA_ID)
    assert missed.content == "while you were away"
    assert len(fake.gateway.identifies) == 1 and len(fake.gateway.resumes) == 1
    assert bot.heard.empty()  # delivered once, not replayed twice


async def test_gateway_speaks_plain_json_resumes_and_hides_content_without_the_intent(
    fake: FakeDiscord,
) -> None:
    url = fake.gateway_url + "?v=10&encoding=json"
    with pytest.raises(TimeoutError):
        fake.wait_for_gateway(0.05)  # nobody has identified yet
    async with ClientSession() as session:
        async with session.ws_connect(url) as ws:
            hello = await ws.receive(timeout=5)
            assert hello.type is WSMsgType.TEXT and json.loads(hello.data)["op"] == 10
            await ws.send_json(
                {"op": 2, "d": {"token": TOKEN, "intents": INTENT_GUILD_MESSAGES, "properties": {}}}
            )
            ready, guild = await ws.receive_json(timeout=5), await ws.receive_json(timeout=5)
            assert [(e["t"], e["s"]) for e in (ready, guild)] == [("READY", 1), ("GUILD_CREATE", 2)]
            await asyncio.to_thread(fake.wait_for_gateway, 2)
            await ws.send_json({"op": 1, "d": 2})
            assert (await ws.receive_json(timeout=5))["op"] == 11
            await ws.close(code=4000)  # not 1000: a clean close would end the session

        await asyncio.to_thread(fake.say, ENG_CHANNEL_ID, BOB_ID, "deploy is red")
        async with session.ws_connect(url) as ws:
            await ws.receive(timeout=5)
            resume = {"token": TOKEN, "session_id": ready["d"]["session_id"], "seq": 2}
            await ws.send_json({"op": 6, "d": resume})
            missed, resumed = await ws.receive_json(timeout=5), await ws.receive_json(timeout=5)
            assert (missed["t"], missed["s"], resumed["t"], resumed["s"]) == (
                "MESSAGE_CREATE",
                3,
                "RESUMED",
                4,
            )
            assert missed["d"]["content"] == ""  # no MESSAGE_CONTENT intent, no mention
            await asyncio.to_thread(fake.say, ENG_CHANNEL_ID, BOB_ID, "look", mention_bot=True)
            mention = await ws.receive_json(timeout=5)
            assert mention["d"]["content"] == f"<@{BOT_ID}> look" and mention["s"] == 5
            assert mention["d"]["member"]["roles"] == [MAINTAINERS_ROLE_ID]

        async with session.ws_connect(url) as ws:
            await ws.receive(timeout=5)
            await ws.send_json({"op": 2, "d": {"token": "wrong", "intents": 0, "properties": {}}})
            assert (await ws.receive(timeout=5)).type is WSMsgType.CLOSE and ws.close_code == 4004


def test_rest_checks_the_token_pages_members_and_sends_rate_limit_headers(
    fake: FakeDiscord, api: httpx.Client
) -> None:
    refused = httpx.get(f"{fake.api_url}/users/@me", headers={"Authorization": "Bot wrong"})
    assert refused.status_code == 401 and refused.json() == {"message": "401: Unauthorized", "code": 0}

    first = api.get(f"/guilds/{GUILD_ID}/members", params={"limit": 2})
    rest = api.get(
        f"/guilds/{GUILD_ID}/members", params={"limit": 2, "after": first.json()[-1]["user"]["id"]}
    )
    assert [m["user"]["username"] for m in first.json() + rest.json()] == ["openloop", "alice", "bob", "mia"]
    assert first.headers["content-type"] == "application/json"
    assert float(first.headers["X-RateLimit-Reset-After"]) <= 1.0 and first.headers["Via"]
    assert int(first.headers["X-RateLimit-Remaining"]) == int(first.headers["X-RateLimit-Limit"]) - 1
    assert first.headers["X-RateLimit-Bucket"] == rest.headers["X-RateLimit-Bucket"]

    fake.rate_limit("POST", f"/channels/{ENG_CHANNEL_ID}/messages", retry_after=0.2)
    limited = api.post(f"/channels/{ENG_CHANNEL_ID}/messages", json={"content": "hi"})
    assert limited.status_code == 429 and limited.json()["retry_after"] == 0.2
    assert limited.headers["Retry-After"] == "1" and limited.headers["X-RateLimit-Remaining"] == "0"
    empty = api.post(f"/channels/{ENG_CHANNEL_ID}/messages", json={"content": ""})
    assert empty.status_code == 400 and empty.json()["code"] == 50006
    assert api.get("/channels/1/messages").json()["code"] == 10003


def test_a_thread_from_a_message_takes_its_id_and_holds_replies(fake: FakeDiscord, api: httpx.Client) -> None:
    root = api.post(f"/channels/{ENG_CHANNEL_ID}/messages", json={"content": "Task started"}).json()
    made = api.post(f"/channels/{ENG_CHANNEL_ID}/messages/{root['id']}/threads", json={"name": "task"})
    assert made.status_code == 201
    assert (made.json()["id"], made.json()["type"], made.json()["parent_id"]) == (
        root["id"],
        11,
        ENG_CHANNEL_ID,
    )
    api.post(f"/channels/{root['id']}/messages", json={"content": "step 1 done"})
    fake.say(root["id"], ALICE_ID, "thanks")
    assert [m["content"] for m in fake.messages(root["id"])] == ["step 1 done", "thanks"]
    again = api.post(f"/channels/{ENG_CHANNEL_ID}/messages/{root['id']}/threads", json={"name": "task"})
    assert again.json()["code"] == 160004


class _Receiver(BaseHTTPRequestHandler):
    """An app's interactions endpoint: keeps what arrived, answers a PING with a PONG."""

    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), body))
        answer = json.dumps({"type": 1}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


def test_interactions_are_signed_with_the_public_key_and_forgeries_are_not(fake: FakeDiscord) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/interactions"
    _Receiver.received.clear()
    try:
        for forged, stale in [(False, False), (True, False), (False, True)]:
            assert fake.deliver(url, fake.ping_interaction(), forge=forged, stale=stale).json() == {"type": 1}
    finally:
        server.shutdown()
    (signed, body), forgery, (old, _) = _Receiver.received
    assert (
        json.loads(body)["type"] == 1 and body == json.dumps(json.loads(body), separators=(",", ":")).encode()
    )
    assert _verifies(fake.public_key, signed, body)
    assert not _verifies(fake.public_key, *forgery)
    assert time.time() - int(old["X-Signature-Timestamp"]) >= 590


def _verifies(public_key: str, headers: dict[str, str], body: bytes) -> bool:
    """What an app's endpoint checks: Ed25519 over timestamp + body, with the app's public key."""
    signed = headers["X-Signature-Timestamp"].encode() + body
    try:
        VerifyKey(bytes.fromhex(public_key)).verify(signed, bytes.fromhex(headers["X-Signature-Ed25519"]))
    except nacl.exceptions.BadSignatureError:
        return False
    return True


def test_interaction_responses_defer_edit_and_follow_up(fake: FakeDiscord) -> None:
    command = fake.command_interaction(MIA_ID, ENG_CHANNEL_ID, "ask", {"question": "why is CI red?"})
    assert command["data"]["options"][0] == {
        "type": 1,
        "name": "ask",
        "options": [{"type": 3, "name": "question", "value": "why is CI red?"}],
    }
    assert command["member"]["roles"] == [MAINTAINERS_ROLE_ID] and command["version"] == 1
    callback = f"{fake.api_url}/interactions/{command['id']}/{command['token']}/callback"
    deferred = httpx.post(callback, params={"with_response": "true"}, json={"type": 5})
    assert deferred.json()["interaction"]["response_message_loading"] is True
    assert httpx.post(callback, json={"type": 5}).json()["code"] == 40060
    webhook = f"{fake.api_url}/webhooks/{fake.application_id}/{command['token']}"
    httpx.patch(f"{webhook}/messages/@original", json={"content": "CI is red because of lint."})
    httpx.post(webhook, json={"content": "only you see this", "flags": 64})
    assert [m["content"] for m in fake.messages(ENG_CHANNEL_ID)] == ["CI is red because of lint."]
    assert [m["content"] for m in fake.ephemerals] == ["only you see this"]
    assert [r["type"] for r in fake.interaction_responses if r["kind"] == "callback"] == [5]

    card = fake.messages(ENG_CHANNEL_ID)[0]
    click = fake.button_interaction(BOB_ID, card, "approve:1")
    assert (click["type"], click["data"]) == (3, {"custom_id": "approve:1", "component_type": 2})
    update = f"{fake.api_url}/interactions/{click['id']}/{click['token']}/callback"
    assert httpx.post(update, json={"type": 7, "data": {"content": "Approved by bob"}}).status_code == 204
    assert fake.messages(ENG_CHANNEL_ID)[0]["content"] == "Approved by bob"
    unknown = httpx.post(f"{fake.api_url}/interactions/1/nope/callback", json={"type": 4})
    assert unknown.status_code == 404 and unknown.json()["code"] == 10062
