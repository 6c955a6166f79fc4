"""`loop.start`: an agent's tool call starts a repair loop from an operator's loop file,
exactly once however often the call is retried."""

from __future__ import annotations

import textwrap
from pathlib import Path

from pydantic import SecretStr
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.tools.tool_activities import run_tool
from tests.fakes.slack_api import FakeSlack
from tests.integration.loop_env import loop_world, project_with
from workflows.loop_types import LoopResult, LoopStatus
from workflows.types import MemoryScopeRef, SurfaceContext, ToolCallInput

CHANNEL = "C0LOOPS"
SLACK_TOKEN = "xoxb-loop-token"
LOOP_FILE = """\
    apiVersion: openloop.ai/v1alpha1
    kind: Loop
    metadata: {{name: keep-green}}
    spec:
      mission: {{objective: Keep the tests green}}
      repo: {{github: {repo}, base: main}}
      commands:
        fix: python autofix.py {{last_error}}
        verify: python -m pytest -q -p no:cacheprovider
    """


def call(arguments: dict[str, object], key: str, thread: str = "1.0") -> ToolCallInput:
    return ToolCallInput(
        task_id="task-loop-start",
        step=2,
        call_id="call-1",
        tool="loop.start",
        arguments=arguments,
        idempotency_key=key,
        context=SurfaceContext(surface="slack", channel=CHANNEL, user="U1", thread=thread),
        memory=MemoryScopeRef("ws", "helper", "channel", "slack:C1", "offline/hash", 30),
        requested_by="U1",
    )


async def test_an_agent_starts_a_loop_that_repairs_the_project_once_and_tells_the_thread(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    slack = FakeSlack(token=SLACK_TOKEN).start()
    root = slack.add_message(CHANNEL, "@agent keep our tests green", user="U1")
    async with loop_world(
        client, pg_url, tmp_path, project_with(tmp_path),
        slack_bot_token=SecretStr(SLACK_TOKEN), slack_api_url=slack.base_url,
    ) as world:  # fmt: skip
        world.settings.loops_dir.mkdir(parents=True)
        (world.settings.loops_dir / "keep-green.yaml").write_text(
            textwrap.dedent(LOOP_FILE.format(repo=world.repo))
        )
        env = ActivityEnvironment(client=client)
        first = await env.run(run_tool, call({"loop": "keep-green"}, "task-loop-start:2:call-1", root))
        again = await env.run(run_tool, call({"loop": "keep-green"}, "task-loop-start:2:call-1", root))
        assert first.ok, first.output
        assert again.output == first.output  # a retried call names the same loop
        loop_id = first.output.split()[3].rstrip(":")
        result = await client.get_workflow_handle(loop_id, result_type=LoopResult).result()
        missing = await env.run(run_tool, call({"loop": "no-such-loop"}, "task-loop-start:3:call-1"))
        escape = await env.run(run_tool, call({"loop": "../secrets"}, "task-loop-start:4:call-1"))

    told = [m["text"] for m in slack.thread(CHANNEL, root) if "Repair loop" in m.get("text", "")]
    slack.stop()
    assert result.status is LoopStatus.SUCCESS
    assert len(told) == 1 and f"{loop_id}" in told[0] and "ended SUCCESS after 2 round(s)" in told[0]
    runs = [w async for w in client.list_workflows(f"WorkflowId = '{loop_id}'")]
    assert len(runs) == 1
    assert not missing.ok and missing.error_kind == "not_found" and "keep-green" in missing.output
    assert not escape.ok and escape.error_kind == "invalid"
