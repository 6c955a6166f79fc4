"""What real providers answer that the offline stand-in never does, in each wire format, on
the real worker: an answer with nothing in it, a refusal, and tool calls that must not run
(not offered, arguments that are not JSON, arguments that break the schema) — each told to
the model as the call's result while the task goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import litellm
import pytest
from temporalio.client import Client

from config.settings import Settings
from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.integration.contract_env import WIRES, Wire
from tests.integration.model_env import call_input, run
from tests.reliability.harness import agent_config, start, stored
from workers.worker import build_worker
from workflows.conversation import Conversation
from workflows.types import TaskStatus
from workflows.untrusted import unwrap

WIRE = pytest.mark.parametrize("wire", WIRES, ids=[wire.name for wire in WIRES])


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelAPI]:
    fake = FakeModelAPI().start()
    for wire in WIRES:
        for name, value in wire.environment(fake).items():
            monkeypatch.setenv(name, value)
    yield fake
    fake.stop()


def agent_on(wire: Wire, **spec: object) -> object:
    budget = {} if wire.priced else {"budget": {"on_exceeded": "warn"}}
    return agent_config(model_policy={"default": wire.model, "max_output_tokens": 256}, **budget, **spec)


@WIRE
async def test_an_empty_answer_stops_the_task_with_the_providers_reason(
    wire: Wire, client: Client, settings: Settings, task_queue: str, api: FakeModelAPI
) -> None:
    agent = await stored(settings.require_database_url(), agent_on(wire))  # type: ignore[arg-type]
    api.answer("")
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "What changed in the deploy?")
        result = await asyncio.wait_for(handle.result(), 60)
    assert {request.wire for request in api.requests} == {wire.name}
    assert result.status == TaskStatus.ERROR
    assert "ended its turn with no answer and no tool call (finish reason 'stop')" in result.reason
    assert "(no answer)" not in result.reply and result.reason in result.reply


@pytest.mark.parametrize("wire", [w for w in WIRES if w.name != "ollama"], ids=["openai", "anthropic"])
async def test_a_refusal_stops_the_task_and_says_what_the_model_said(
    wire: Wire, client: Client, settings: Settings, task_queue: str, api: FakeModelAPI
) -> None:
    agent = await stored(settings.require_database_url(), agent_on(wire))  # type: ignore[arg-type]
    api.answer(None, refusal="I can't help with that.")
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "Write the exploit.")
        result = await asyncio.wait_for(handle.result(), 60)
    assert {request.wire for request in api.requests} == {wire.name}
    assert result.status == TaskStatus.ERROR
    assert "refused to answer" in result.reason and "I can't help with that." in result.reason


@WIRE
async def test_calls_that_must_not_run_are_told_to_the_model_and_the_task_goes_on(
    wire: Wire, client: Client, settings: Settings, task_queue: str, api: FakeModelAPI
) -> None:
    tools = [{"name": "memory.search", "permissions": ["memory:read"]}]
    agent = await stored(settings.require_database_url(), agent_on(wire, tools=tools))  # type: ignore[arg-type]
    api.answer_tool_calls(
        [
            tool_call("call_json", "memory__search", "{not json"),
            tool_call("call_schema", "memory__search", {"query": 7}),
            tool_call("call_unknown", "shell__exec", {"cmd": "cat /etc/passwd"}),
        ]
    )
    api.answer("None of that worked; here is what I know.")
    async with build_worker(client, settings.model_copy(update={"task_queue": task_queue})):
        handle = await start(client, task_queue, agent, "Search, then read /etc/passwd")
        result = await asyncio.wait_for(handle.result(), 60)
    assert {request.wire for request in api.requests} == {wire.name}
    assert result.status == TaskStatus.SUCCESS and result.reply.startswith("None of that worked")
    told = [unwrap(content) for _, content in api.requests[1].tool_results()]
    assert len(told) == 3 and all(text.startswith("Error") for text in told), told
    assert any("unknown tool 'shell.exec'" in text for text in told)
    # Anthropic's and Ollama's wire carry arguments as objects: LiteLLM hands unparseable
    # ones on as `{}`, which the schema then refuses ("'query' is a required property").
    assert any("is not of type 'string'" in text for text in told)
    assert any("not valid JSON" in text or "'query' is a required property" in text for text in told)
    history = (await handle.fetch_history()).to_json()
    assert "openloop.tool.run" not in history  # nothing ran


async def test_after_a_fallback_the_answering_models_window_sizes_the_conversation(
    db_settings: Settings, api: FakeModelAPI
) -> None:
    anthropic, openai = WIRES[1].model, WIRES[0].model
    api.fail(529, model=anthropic.split("/", 1)[1])  # overloaded: the next model answers
    api.answer("From the fallback.", model=openai.split("/", 1)[1])
    result = await run(call_input(models=[anthropic, openai]))
    assert result.usage.model == openai and result.text == "From the fallback."
    window = litellm.get_model_info(openai)["max_input_tokens"]
    assert result.context_window == window != litellm.get_model_info(anthropic)["max_input_tokens"]
    conversation = Conversation(0, 0, [])
    conversation.last_context_window = result.context_window
    conversation.last_prompt_tokens = int(window * 0.7)  # past the share of this model's window
    assert conversation.needs_compaction(None)
    assert not conversation.needs_compaction(1_000_000)  # the policy's own window wins
