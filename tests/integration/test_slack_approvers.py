"""Who may approve, what the approval card shows, App Home: on the real dev server, real
Postgres, the real worker, the fake Slack Web API and (for a priced model) the fake
OpenAI-compatible server that LiteLLM's real client talks to.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import yaml
from pydantic import SecretStr
from temporalio.client import Client

from activities.slack.client import bot_client
from activities.slack.names import SlackNames, resolve_names
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.tasks import task_id_for
from surfaces.timeline import story_from_history
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.fakes.slack_api import BOT_USER, FakeSlack
from tests.helpers import eventually_async
from tests.integration.slack_env import click, field_text, mention, post_click, post_event, settled
from tests.integration.slack_flow_env import TOKEN, slack_setup, surfaces
from workers import worker as worker_module
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import TaskStatus


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack(token=TOKEN) as server:
        yield server


def agent_yaml(name: str, channel: str, approvers: list[str], models: str = "") -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(f"""
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: {name}
spec:
  surfaces:
    slack:
      channels: [{channel}]
  tools:
    - name: memory.save
      permissions: [memory:write]
  approvals:
    require_for: [memory.save]
    approvers: {approvers}
{models}
""")
    return config


def new_channel() -> str:
    return "C" + uuid.uuid4().hex[:10].upper()


def card(fake: FakeSlack, channel: str, root: str) -> dict[str, Any] | None:
    return next(
        (m for m in fake.thread(channel, root) if any(b["type"] == "actions" for b in m.get("blocks") or [])),
        None,
    )


def home_opened(user: str) -> dict[str, Any]:
    payload = mention("D0HOME", user=user)
    payload["event"] = {"type": "app_home_opened", "user": user, "channel": "D0HOME", "tab": "home"}
    return payload


def start_thread(fake: FakeSlack, channel: str) -> tuple[str, dict[str, Any]]:
    root = fake.add_message(channel, "Which database for the usage ledger?", user="U_ALICE")
    fake.add_message(channel, "Decision: we go with Postgres 16.", user="U_BOB", thread_ts=root)
    text = f"<@{BOT_USER}> summarize this thread and capture the decision"
    asking = fake.add_message(channel, text, user="U_ALICE", thread_ts=root)
    event = mention(channel, text=text, thread_ts=root)
    event["event"]["ts"] = asking
    return root, event


async def test_a_maintainers_member_approves_an_outsider_is_refused_and_the_card_is_truthful(
    settings: Settings, client: Client, task_queue: str, fake: FakeSlack, api: FakeModelAPI
) -> None:
    channel = new_channel()
    for user, handle in (("U_ALICE", "alice"), ("U_MIA", "mia"), ("U_MAX", "max"), ("U_MALLORY", "mallory")):
        fake.add_user(user, handle)
    fake.set_usergroup("S0MAINT", ["U_MIA"], handle="maintainers")
    models = "  model_policy:\n    default: gpt-4o\n    fallbacks: [gpt-4o-mini]"
    config = AgentConfig.model_validate(
        agent_yaml(f"grp-{uuid.uuid4().hex[:6]}", channel, ["@maintainers"], models)
    )
    slack_settings = settings.model_copy(
        update={"slack_bot_token": SecretStr(TOKEN), "slack_api_url": fake.base_url}
    )
    applied, problems = await resolve_names(config, SlackNames(bot_client(slack_settings)))
    assert problems == [] and applied.spec.approvals.approvers == ["S0MAINT"]  # the group, not its members
    settings = await slack_setup(settings, fake, task_queue, applied.model_dump(mode="json"))
    fake.set_usergroup("S0MAINT", ["U_MIA", "U_MAX"], handle="maintainers")  # Max joined after apply
    # The policy's first model is missing at the provider; its fallback answers.
    api.fail(404, model="gpt-4o")
    save = tool_call("call_1", "memory.save", {"content": "We chose Postgres 16 for the usage ledger"})
    api.answer_tool_calls([save], model="gpt-4o-mini", prompt_tokens=1500, completion_tokens=120)
    api.answer("Saved the decision.", prompt_tokens=1700, completion_tokens=20)
    root, event = start_thread(fake, channel)
    task_id = task_id_for("slack", event["event_id"])

    async with worker_module.build_worker(client, settings), surfaces(settings, client) as http:
        assert (await post_event(http, event)).status_code == 200
        assert await settled(settings, event["event_id"]) == "started"
        message = await eventually_async(lambda: card(fake, channel, root), "the approval card", 30.0)
        assert field_text(message, "Model") == "`gpt-4o-mini`"  # the model that answered
        cost = field_text(message, "Estimated cost")
        amount = re.match(r"\$(\d+\.\d+) to finish", cost)
        assert amount is not None and float(amount.group(1)) > 0, cost
        assert "gpt-4o-mini's prices" in cost
        assert field_text(message, "Who may approve") == "<!subteam^S0MAINT> (2 people)"
        assert field_text(message, "Expires").startswith("<!date^")
        assert "Postgres 16 for the usage ledger" in str(message["blocks"])  # the exact arguments

        # App Home: Max sees the approval waiting for him; Mallory does not.
        for user in ("U_MAX", "U_MALLORY"):
            assert (await post_event(http, home_opened(user))).status_code == 200
        await eventually_async(lambda: fake.directory.home_of("U_MALLORY"), "U_MALLORY's App Home", 30.0)
        max_home = str(
            await eventually_async(lambda: fake.directory.home_of("U_MAX"), "U_MAX's App Home", 30.0)
        )
        assert "memory.save" in max_home and task_id in max_home
        mallory_home = str(fake.directory.home_of("U_MALLORY"))
        assert "Nothing waits for your decision" in mallory_home and task_id not in mallory_home

        value = next(b for b in message["blocks"] if b["type"] == "actions")["elements"][0]["value"]
        outsider = click(task_id, user="U_MALLORY", value=value, channel=channel)
        assert (await post_click(http, outsider)).status_code == 200
        # Told at once, privately, by the task's own verdict; and the refusal is audited.
        [told] = [e for e in fake.ephemerals if e["channel"] == channel and e["user"] == "U_MALLORY"]
        assert "not allowed" in told["text"] and "<!subteam^S0MAINT>" in told["text"]
        handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
        reason = "U_MALLORY is not an approver of this agent"
        with psycopg.connect(settings.require_database_url()) as conn:
            audited = conn.execute(
                "SELECT kind, outcome, tool FROM audit_log WHERE task_id = %s AND approver = 'U_MALLORY'",
                (task_id,),
            ).fetchall()
        assert audited == [("approval_refused", reason, "memory.save")]
        assert (await handle.query(AgentTaskWorkflow.status)).pending_approval is not None

        # Max joined the group after the agent was applied: the task takes his click, and no
        # one is told anything privately.
        member = click(task_id, user="U_MAX", value=value, channel=channel)
        assert (await post_click(http, member)).status_code == 200
        assert not [e for e in fake.ephemerals if e["user"] == "U_MAX"]
        result = await handle.result()
        assert result.status == TaskStatus.SUCCESS, result.reason

        assert (await post_event(http, home_opened("U_ALICE"))).status_code == 200
        alice_home = str(
            await eventually_async(lambda: fake.directory.home_of("U_ALICE"), "U_ALICE's App Home", 30.0)
        )

    # A refused click never reaches the history; the member's decision is in it.
    story = story_from_history([e async for e in handle.fetch_history_events()])
    assert [(e.kind, e.what) for e in story.entries if e.who in ("U_MALLORY", "U_MAX")] == [
        ("signal", "approve from U_MAX"),
        ("approval", "memory.save approved by U_MAX"),
    ]
    resolved = next(m for m in fake.thread(channel, root) if m["ts"] == message["ts"])
    assert all(b["type"] != "actions" for b in resolved["blocks"])
    shown = str(resolved["blocks"])
    assert "Approved" in shown and "by <@U_MAX>" in shown and "<!date^" in shown
    # Alice's home lists her task and what this channel spent this month (a priced model).
    assert task_id in alice_home and "summarize this thread" in alice_home
    spent = re.search(rf"<#{channel}> · [a-z0-9-]+: \*\$(\d+\.\d+)\*", alice_home)
    assert spent is not None and float(spent.group(1)) > 0, alice_home


async def test_an_at_handle_approver_is_found_across_users_list_pages(
    settings: Settings, client: Client, task_queue: str
) -> None:
    channel = new_channel()
    with FakeSlack(token=TOKEN, page_size=2) as fake:
        for index in range(5):
            fake.add_user(f"U_OTHER{index}", f"other{index}")
        fake.add_user("U_DANA", "dana", "Dana")
        # Stored as written (an agent saved without `agents apply`): resolved when asked.
        config = agent_yaml(f"handle-{uuid.uuid4().hex[:6]}", channel, ["@dana"])
        settings = await slack_setup(settings, fake, task_queue, config)
        root, event = start_thread(fake, channel)
        task_id = task_id_for("slack", event["event_id"])
        async with worker_module.build_worker(client, settings), surfaces(settings, client) as http:
            assert (await post_event(http, event)).status_code == 200
            message = await eventually_async(lambda: card(fake, channel, root), "the approval card", 30.0)
            assert field_text(message, "Who may approve") == "`@dana` (1 person)"
            assert field_text(message, "Estimated cost") == "offline/demo is the offline model: no cost"
            pages = fake.calls_to("users.list")
            assert len(pages) >= 3 and any(c.get("cursor") for c in pages)  # every page was read
            value = next(b for b in message["blocks"] if b["type"] == "actions")["elements"][0]["value"]
            dana = click(task_id, user="U_DANA", value=value, channel=channel)
            assert (await post_click(http, dana)).status_code == 200
            result = await client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id).result()
        assert result.status == TaskStatus.SUCCESS, result.reason
        assert not fake.ephemerals  # Dana was not refused
