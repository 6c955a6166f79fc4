"""Slack's requests to the surfaces app, for the Slack integration tests: events and button
clicks built as Slack sends them, signed as Slack signs them (slack-sdk's SignatureVerifier,
or Slack's scheme over raw bytes) and posted to `/slack/events` and `/slack/interactivity`;
then what the inbox did with an event, and the task it started."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import httpx
from psycopg_pool import AsyncConnectionPool
from slack_sdk.signature import SignatureVerifier
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from activities.slack import blocks
from activities.store.db import get_pool
from config.settings import Settings
from tests.fakes.slack_api import BOT_USER
from workflows.types import TaskInput

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"


def new_channel() -> str:
    return "C" + uuid.uuid4().hex[:10].upper()


def signed(body: bytes, timestamp: int | None = None, secret: str = SECRET) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    if body.isascii() or _utf8(body):
        signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    else:  # Slack's scheme over raw bytes, for bodies slack-sdk cannot decode
        digest = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
        signature = "v0=" + digest.hexdigest()
    assert signature is not None
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature}


def _utf8(body: bytes) -> bool:
    try:
        body.decode()
    except UnicodeDecodeError:
        return False
    return True


def mention(
    channel: str,
    user: str = "U_ALICE",
    text: str | None = None,
    *,
    event_id: str | None = None,
    thread_ts: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    event = {
        "type": "app_mention",
        "user": user,
        "channel": channel,
        "ts": "1700000000.000100",
        "text": text if text is not None else f"<@{BOT_USER}> summarize this thread",
        **({"thread_ts": thread_ts} if thread_ts else {}),
        **extra,
    }
    return {
        "type": "event_callback",
        "team_id": "T0FAKE",
        "api_app_id": "A0FAKE",
        "event_id": event_id or "Ev" + uuid.uuid4().hex[:10].upper(),
        "event_time": 1700000000,
        "authorizations": [{"team_id": "T0FAKE", "user_id": BOT_USER, "is_bot": True}],
        "event": event,
    }


async def post_event(
    http: httpx.AsyncClient, payload: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.Response:
    body = json.dumps(payload).encode()
    return await http.post(
        "/slack/events",
        content=body,
        headers={"Content-Type": "application/json", **signed(body), **(headers or {})},
    )


async def post_click(http: httpx.AsyncClient, payload: dict[str, Any]) -> httpx.Response:
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return await http.post(
        "/slack/interactivity",
        content=body,
        headers={"Content-Type": "application/x-www-form-urlencoded", **signed(body)},
    )


async def settled(settings: Settings, event_id: str, seconds: float = 15.0) -> str | None:
    """Once the inbox dispatched the event, what it did; None when it was never recorded."""
    pool = await get_pool(settings.require_database_url())
    deadline = time.monotonic() + seconds
    while True:
        async with pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT handled_at, outcome FROM slack_inbox WHERE event_id = %s", (event_id,)
                )
            ).fetchone()
        if row is None:
            return None
        if row["handled_at"] is not None:
            return str(row["outcome"])
        assert time.monotonic() < deadline, f"{event_id} not dispatched: {row['outcome']}"
        await asyncio.sleep(0.02)


async def started_input(client: Client, task_id: str) -> TaskInput | None:
    """The task's start input, or None when no task has this id."""
    handle = client.get_workflow_handle(task_id)
    try:
        async for event in handle.fetch_history_events(page_size=1):
            attrs = event.workflow_execution_started_event_attributes
            [inp] = await client.data_converter.decode(list(attrs.input.payloads), [TaskInput])
            return inp  # type: ignore[no-any-return]
    except RPCError as exc:
        assert exc.status == RPCStatusCode.NOT_FOUND
    return None


async def terminate(client: Client, task_id: str) -> None:
    await client.get_workflow_handle(task_id).terminate(reason="test over")


def click(
    task_id: str,
    user: str = "U_APPROVER",
    action_id: str = blocks.APPROVE_ACTION,
    value: str | None = None,
    channel: str = "C_CLICK",
) -> dict[str, Any]:
    value = (
        value
        if value is not None
        else json.dumps({"task_id": task_id, "request_id": "apr-1", "action_id": "a" * 32})
    )
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower()},
        "api_app_id": "A0FAKE",
        "team": {"id": "T0FAKE"},
        "container": {
            "type": "message",
            "message_ts": "1700000001.000200",
            "channel_id": channel,
            "is_ephemeral": False,
            "thread_ts": "1700000000.000100",
        },
        "channel": {"id": channel, "name": "dev"},
        "message": {"ts": "1700000001.000200", "thread_ts": "1700000000.000100"},
        "response_url": "https://hooks.slack.test/actions/1",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "approval:apr-1",
                "value": value,
                "action_ts": "1700000002.000300",
            }
        ],
    }


def field_text(message: dict[str, Any], title: str) -> str:
    """The text of the card's field whose title is `title`."""
    for block in message["blocks"]:
        for item in block.get("fields") or []:
            if item["text"].startswith(f"*{title}*\n"):
                return str(item["text"].split("\n", 1)[1])
    raise AssertionError(f"no field {title!r} on the card")


async def pending_only(pool: AsyncConnectionPool, *event_ids: str) -> None:
    """Leave only these events due, so a test's dispatch sees nothing of another test's."""
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE slack_inbox SET handled_at = now() WHERE handled_at IS NULL AND NOT event_id = ANY(%s)",
            (list(event_ids),),
        )
