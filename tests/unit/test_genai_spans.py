"""GenAI span pieces without a server: provider names from LiteLLM model strings, tool
attributes with content off and on (masked), and the agent span made with the ids its
workflow derived, so spans made earlier under those ids hang from it."""

from __future__ import annotations

import json

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from activities.genai_spans import provider_name, tool_attributes
from workers.agent_span import AgentRunSpan, AgentSpanMaker
from workers.span_ids import run_span_ids
from workflows.types import MemoryScopeRef, SurfaceContext, ToolCallInput, ToolCallResult

TOKEN = "xoxb-" + "1234567890-abcdef"


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("openai/gpt-4o-mini", "openai"),
        ("gpt-4o", "openai"),
        ("anthropic/claude-sonnet-4-5", "anthropic"),
        ("claude-3-5-haiku-latest", "anthropic"),
        ("bedrock/anthropic.claude-3", "aws.bedrock"),
        ("gemini/gemini-2.0-flash", "gcp.gemini"),
        ("vertex_ai/gemini-2.0-flash", "gcp.vertex_ai"),
        ("azure/my-deployment", "azure.ai.openai"),
        ("xai/grok-3", "x_ai"),
        ("ollama/llama3", "ollama"),  # a prefix the conventions do not list is kept
        ("offline/demo", "openloop.offline"),
    ],
)
def test_provider_name_follows_the_litellm_prefix(model: str, provider: str) -> None:
    assert provider_name(model) == provider


def _call() -> ToolCallInput:
    return ToolCallInput.for_call(
        "task-1",
        2,
        "call_9",
        "slack.post_message",
        {"text": f"use {TOKEN}", "api_token": "plain"},
        SurfaceContext(surface="slack", channel="C1", user="U1"),
        MemoryScopeRef("ws", "helper", "channel", "slack:C1", "offline", 30),
    )


def test_tool_content_is_off_by_default_and_masked_when_on() -> None:
    result = ToolCallResult(ok=False, output=f"refused: {TOKEN}", error_kind="permission")
    off = tool_attributes(_call(), result, capture_content=False)
    assert off["gen_ai.operation.name"] == "execute_tool"
    assert off["gen_ai.tool.call.id"] == "call_9" and off["gen_ai.tool.type"] == "function"
    assert off["error.type"] == "permission"
    assert TOKEN not in repr(off) and "gen_ai.tool.call.arguments" not in off

    on = tool_attributes(_call(), result, capture_content=True)
    arguments = json.loads(str(on["gen_ai.tool.call.arguments"]))
    assert arguments == {"text": "use ***", "api_token": "***"}
    assert on["gen_ai.tool.call.result"] == json.dumps("refused: ***")


def test_the_agent_span_gets_the_ids_its_children_already_named() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # a provider of the user's own: its ids are made pinnable
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace_id, span_id = run_span_ids("run-1")
    assert run_span_ids("run-1") == (trace_id, span_id) != run_span_ids("run-2")

    # A span started earlier under the derived ids, as an activity of the run would be.
    derived = trace.SpanContext(trace_id, span_id, is_remote=False, trace_flags=trace.TraceFlags(1))
    with provider.get_tracer("t").start_as_current_span(
        "chat offline/demo", trace.set_span_in_context(trace.NonRecordingSpan(derived))
    ):
        pass
    maker = AgentSpanMaker(provider)
    assert maker.on()
    maker.make(AgentRunSpan("invoke_agent helper", trace_id, span_id, 0, True, 1_000, 5_000, {"a": 1}))
    chat, agent = exporter.get_finished_spans()
    assert chat.parent is not None and chat.parent.span_id == agent.context.span_id == span_id
    assert agent.context.trace_id == chat.context.trace_id == trace_id
    assert agent.parent is None and (agent.start_time, agent.end_time) == (1_000, 5_000)
    # Spans made afterwards get random ids again.
    with provider.get_tracer("t").start_as_current_span("next") as after:
        assert after.get_span_context().span_id != span_id


def test_no_agent_span_without_an_sdk_provider() -> None:
    assert not AgentSpanMaker(trace.NoOpTracerProvider()).on()
