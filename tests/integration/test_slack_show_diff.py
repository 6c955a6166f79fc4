"""The "Show diff" button of a draft pull request's Slack card, on a real coding task waiting
for approval (real Temporal, Postgres, a loop worker, git's smart HTTP, a fake GitHub), the
real surfaces app (signed clicks on `/slack/interactivity`) and the fake Slack Web API:

- the card of the real request carries Approve, Deny and Show diff; a click on Show diff posts
  the stored diff the request names, byte for byte, as a snippet in the card's thread, and
  decides nothing;
- a click on a request that no longer waits answers the clicker alone, with the CLI command.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr
from temporalio.client import Client

from activities.slack import blocks
from config.settings import Settings
from surfaces.app import create_app
from tests.fakes.model_api import FakeModelAPI
from tests.fakes.slack_api import FakeSlack
from tests.helpers import eventually_async, pending_approval
from tests.integration.coding_env import coding_world, result_of, script_fix
from tests.integration.slack_env import SECRET, click, new_channel, post_click
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import ApprovalDecision, TaskStatus

SLACK_TOKEN = "xoxb-show-diff-token"
THREAD = "1700000000.000100"  # the card's thread in `click`


@asynccontextmanager
async def surfaces_app(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, client)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=transport, base_url="http://surfaces.test") as http:
            yield http


def buttons(card: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    [actions] = [block for block in card if block["type"] == "actions"]
    return {element["text"]["text"]: element for element in actions["elements"]}


async def test_show_diff_posts_the_stored_diff_in_the_cards_thread(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    channel = new_channel()
    with FakeSlack(token=SLACK_TOKEN) as slack:
        async with coding_world(client, pg_url, tmp_path) as world:
            settings = world.settings.model_copy(
                update={
                    "slack_signing_secret": SecretStr(SECRET),
                    "slack_bot_token": SecretStr(SLACK_TOKEN),
                    "slack_api_url": slack.base_url,
                }
            )
            script_fix(api, world.repo)
            agent = await world.agent()
            handle = await world.start(agent, f"test_mean fails on main in {world.repo}; fix it")
            pending = await pending_approval(handle)
            _, card = blocks.approval_request_message(handle.id, agent.name, pending)
            shown = buttons(card)
            value = shown["Show diff"]["value"]
            async with surfaces_app(settings, client) as http:
                answer = await post_click(
                    http,
                    click(handle.id, action_id=shown["Show diff"]["action_id"], value=value, channel=channel),
                )
                await eventually_async(lambda: slack.uploaded_files, "the diff's upload", 20.0)
                still = await handle.query(AgentTaskWorkflow.status)
                stale = value.replace(pending.request_id, "apr-decided-long-ago")
                late = await post_click(
                    http, click(handle.id, action_id=blocks.SHOW_DIFF_ACTION, value=stale, channel=channel)
                )
                await eventually_async(
                    lambda: [e for e in slack.ephemerals if e["channel"] == channel], "the private note", 20.0
                )
            await handle.signal(
                AgentTaskWorkflow.deny, ApprovalDecision(pending.request_id, pending.action_id, "cli:local")
            )
            assert (await result_of(handle)).status == TaskStatus.SUCCESS

    assert list(shown) == ["Approve", "Deny", "Show diff"]
    assert shown["Show diff"]["value"] == shown["Approve"]["value"]
    assert answer.status_code == 200 and late.status_code == 200
    [posted] = slack.uploaded_files
    assert hashlib.sha256(posted["content"]).hexdigest() == pending.arguments["diff_sha256"]
    assert posted["content"].startswith(b"diff --git a/calc.py b/calc.py")
    assert (posted["channel"], posted["thread_ts"]) == (channel, THREAD)
    assert posted["name"].endswith(".diff") and posted["title"].startswith(f"{world.repo} → main: 1 file(s)")
    [shared] = [m for m in slack.thread(channel, THREAD) if m.get("files")]
    assert handle.id in shared["text"] and "<@U_APPROVER>" in shared["text"]
    # Showing the diff decided nothing.
    assert still.pending_approval is not None and still.pending_approval.request_id == pending.request_id
    [told] = [e for e in slack.ephemerals if e["channel"] == channel]
    assert told["user"] == "U_APPROVER" and told["thread_ts"] == THREAD
    assert "no longer waiting" in told["text"] and f"openloop tasks diff {handle.id}" in told["text"]
    assert len(slack.uploaded_files) == 1  # the stale click posted nothing
