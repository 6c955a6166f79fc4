"""A task on the real dev server and Postgres, with the offline model and the real activities,
exported over OTLP/HTTP to a receiver in the test: the spans follow OpenTelemetry's GenAI
conventions (v1.41.0) — `invoke_agent`, `chat`, `execute_tool` — nest under the task's
trace, and carry no secret, with message content off (the default) or on (masked)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pydantic import SecretStr
from temporalio.client import Client

from activities.genai_spans import SCHEMA_URL
from activities.store.agents import apply_agent
from activities.store.db import get_pool
from config.loader import example_agent
from config.settings import Settings
from surfaces.tasks import start_task, task_id_for
from tests.helpers import approve_when_pending
from tests.integration.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver
from workers.history import replayer
from workers.telemetry import build_tracer_provider, tracing_interceptors, worker_interceptors
from workers.worker import build_worker
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskStatus

# Token-shaped values a user might paste, and the worker's own GitHub token.
PASTED = "ghp_" + "Zq8" * 8
SETTINGS_TOKEN = "ghp_" + "Wx7" * 8
DECISION = f"Please remember the decision: we chose Postgres 16 for the usage ledger, token {PASTED}."
BASIC = "cHVibGljOnNlY3JldA=="  # base64 of public:secret
CLIENT_KIND, INTERNAL_KIND = 3, 1  # OTLP's SpanKind numbers


@pytest.fixture
def otlp() -> Iterator[OtlpReceiver]:
    yield from otlp_receiver()


async def _run(client: Client, settings: Settings, otlp: OtlpReceiver) -> tuple[str, TaskStatus]:
    """Run the remember-with-approval task with tracing exported to `otlp`; the task id."""
    # The header as Langfuse's instructions spell it: URL-encoded, Basic public:secret key.
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url,
        "OTEL_SERVICE_NAME": "ol-genai",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Basic%20{BASIC}",
    }
    provider = build_tracer_provider(env)
    assert provider is not None
    config = client.config()
    config["interceptors"] = tracing_interceptors(tracer_provider=provider)
    traced = Client(**config)
    stored, _ = await apply_agent(await get_pool(settings.require_database_url()), example_agent("minimal"))
    context = SurfaceContext(
        surface="cli", channel=f"ch-{uuid.uuid4().hex[:8]}", user="cli:local", event_id=uuid.uuid4().hex
    )
    async with build_worker(traced, settings, tracer_provider=provider):
        handle, _ = await start_task(
            traced, settings, stored, context, DECISION, task_id=task_id_for("cli", context.event_id or "")
        )
        assert (await approve_when_pending(handle)).tool == "memory.save"
        result = await handle.result()
    # Replayed by a worker with tracing on, as after a restart: the same workflow commands,
    # and the run's agent span is not made a second time.
    interceptors = [*config["interceptors"], *worker_interceptors(tracer_provider=provider)]
    replayed = await replayer([AgentTaskWorkflow], interceptors).replay_workflow(await handle.fetch_history())
    assert replayed.replay_failure is None
    assert provider.force_flush(10_000)
    provider.shutdown()
    return result.task_id, result.status


def _ancestors(spans: dict[str, ReceivedSpan], span: ReceivedSpan) -> list[str]:
    names, parent = [], spans.get(span.parent_span_id)
    while parent is not None:
        names.append(parent.name)
        parent = spans.get(parent.parent_span_id)
    return names


def _settings(settings: Settings, task_queue: str, content: bool) -> Settings:
    return settings.model_copy(
        update={
            "task_queue": task_queue,
            "github_token": SecretStr(SETTINGS_TOKEN),
            "trace_message_content": content,
        }
    )


async def test_a_task_reaches_an_otlp_receiver_as_genai_spans_under_one_trace(
    client: Client, settings: Settings, task_queue: str, otlp: OtlpReceiver
) -> None:
    task_id, status = await _run(client, _settings(settings, task_queue, content=False), otlp)
    assert status == TaskStatus.SUCCESS
    assert set(otlp.requests) == {("/v1/traces", "application/x-protobuf", f"Basic {BASIC}")}
    assert {span.service for span in otlp.spans} == {"ol-genai"}
    by_id = otlp.by_id()

    # One agent span for the task (one run), child of the start call, lasting the run.
    [agent] = otlp.named("invoke_agent ")
    assert agent.name == "invoke_agent helper"
    assert agent.kind == INTERNAL_KIND and agent.schema_url == SCHEMA_URL
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "helper"
    assert agent.attributes["gen_ai.agent.id"] == "default/helper"
    assert agent.attributes["gen_ai.conversation.id"] == task_id
    assert agent.attributes["openloop.task.status"] == "SUCCESS"
    assert by_id[agent.parent_span_id].name == "StartWorkflow:openloop.AgentTask"
    # Everything the task did is in its trace (the test's own queries and signal start theirs).
    callers = ("QueryWorkflow:", "HandleQuery:", "SignalWorkflow:")
    assert {s.trace_id for s in otlp.spans if not s.name.startswith(callers)} == {agent.trace_id}
    assert agent.start_ns < min(s.start_ns for s in otlp.named("RunActivity:"))
    assert agent.end_ns >= max(s.end_ns for s in otlp.named("RunActivity:"))

    # Each model call a `chat` span under the agent's, through its activity's spans.
    chats = otlp.named("chat ")
    assert len(chats) >= 2  # asked to save, then answered
    for chat in chats:
        attrs = chat.attributes
        assert chat.kind == CLIENT_KIND
        assert chat.name == f"chat {attrs['gen_ai.request.model']}"
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "openloop.offline"
        assert attrs["gen_ai.response.model"].startswith("offline/")
        assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
        assert attrs["gen_ai.response.finish_reasons"] in (["stop"], ["tool_calls"])
        assert attrs["gen_ai.conversation.id"] == task_id
        assert "openloop.cost_usd" in attrs
        assert "gen_ai.output.messages" not in attrs  # content is opt-in
        assert _ancestors(by_id, chat)[:3] == [
            "RunActivity:openloop.model.call",
            "StartActivity:openloop.model.call",
            agent.name,
        ]
    # Token counts live on the chat spans only, so a backend adding them up counts each once.
    counted = [s for s in otlp.spans if "gen_ai.usage.input_tokens" in s.attributes]
    assert counted == chats

    # The approved tool call an `execute_tool` span under the agent's.
    [tool] = otlp.named("execute_tool ")
    assert tool.name == "execute_tool memory.save" and tool.kind == INTERNAL_KIND
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "memory.save"
    assert tool.attributes["gen_ai.tool.type"] == "datastore"
    assert tool.attributes["gen_ai.tool.call.id"]
    assert tool.attributes["openloop.tool.approved_by"] == "cli:local"
    assert "gen_ai.tool.call.arguments" not in tool.attributes
    assert agent.name in _ancestors(by_id, tool)

    everything = repr([(s.name, s.attributes) for s in otlp.spans])
    assert PASTED not in everything and SETTINGS_TOKEN not in everything
    assert "Postgres 16" not in everything  # no message content at all by default


async def test_message_content_when_opted_in_is_on_the_spans_masked(
    client: Client, settings: Settings, task_queue: str, otlp: OtlpReceiver
) -> None:
    _, status = await _run(client, _settings(settings, task_queue, content=True), otlp)
    assert status == TaskStatus.SUCCESS
    [tool] = otlp.named("execute_tool memory.save")
    arguments = tool.attributes["gen_ai.tool.call.arguments"]
    assert "Postgres 16" in arguments and "***" in arguments
    assert "Saved" in tool.attributes["gen_ai.tool.call.result"]
    answers = [s.attributes["gen_ai.output.messages"] for s in otlp.named("chat ")]
    assert any("Postgres 16" in answer for answer in answers)
    everything = repr([(s.name, s.attributes) for s in otlp.spans])
    assert PASTED not in everything and SETTINGS_TOKEN not in everything
