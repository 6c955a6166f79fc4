"""The fake model provider's three wires, read with plain HTTP and checked against the providers'
own SDK types (OpenAI's `ChatCompletion` / `ChatCompletionChunk`, Anthropic's `Message` /
`RawMessageStreamEvent` / `ErrorResponse`) and, for Ollama, the fields its API documents.

The SDK models accept unknown fields silently, so every validated object is also walked for
fields its type does not declare: a misspelt or invented field fails here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from anthropic.types import ErrorResponse, Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.shared import ErrorObject
from pydantic import BaseModel, TypeAdapter

from tests.fakes.model_api import FakeModelAPI, tool_call

EVENTS: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
CALLS = [
    tool_call("toolu_01A", "get_weather", {"city": "Paris", "days": [1, 2]}),
    tool_call("toolu_01B", "get_time", {"tz": "UTC"}),
]
SCRIPTS: dict[str, dict[str, Any]] = {
    "text": {
        "content": "Hello there, world!",
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "cached_tokens": 60,
        "cache_creation_tokens": 10,
        "reasoning_tokens": 5,
    },
    "tools": {"content": None, "tool_calls": CALLS},
    "refusal": {"refusal": "I can't help with that."},
    "length": {"content": "cut sho", "finish_reason": "length"},
}
REQUEST = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64}
FINISHES = {"text": "stop", "tools": "tool_calls", "refusal": "stop", "length": "length"}


@pytest.fixture
def api() -> Iterator[FakeModelAPI]:
    fake = FakeModelAPI().start()
    yield fake
    fake.stop()


def exact(value: Any) -> None:
    """Fail on any field an SDK model does not declare, at any depth."""
    if isinstance(value, BaseModel):
        extra = value.model_extra or {}
        assert not extra, f"{type(value).__name__} has undeclared fields {sorted(extra)}"
        for item in value.__dict__.values():
            exact(item)
    elif isinstance(value, list | tuple):
        for item in value:
            exact(item)
    elif isinstance(value, dict):
        for item in value.values():
            exact(item)


def post(api: FakeModelAPI, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{api.root_url}{path}", json=body, timeout=5)


def openai_chunks(text: str) -> list[ChatCompletionChunk]:
    lines = [line.removeprefix("data: ") for line in text.split("\n\n") if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate_json(line) for line in lines[:-1]]
    exact(chunks)
    return chunks


def anthropic_events(text: str) -> list[Any]:
    events = []
    for block in filter(None, text.split("\n\n")):
        name_line, data_line = block.split("\n")
        name, data = name_line.removeprefix("event: "), json.loads(data_line.removeprefix("data: "))
        assert name == data["type"]
        if name == "ping":
            assert data == {"type": "ping"}
            continue
        event = EVENTS.validate_python(data)
        exact(event)
        events.append(event)
    return events


# OpenAI ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", SCRIPTS)
def test_openai_bodies_are_chat_completions(api: FakeModelAPI, case: str) -> None:
    api.answer(**SCRIPTS[case])
    answer = post(api, "/v1/chat/completions", {"model": "gpt-4o", **REQUEST})
    completion = ChatCompletion.model_validate(answer.json())
    exact(completion)
    choice = completion.choices[0]
    assert choice.finish_reason == FINISHES[case]
    if case == "refusal":
        assert choice.message.refusal == "I can't help with that." and choice.message.content is None
    if case == "tools":
        assert [call.function.name for call in choice.message.tool_calls or []] == ["get_weather", "get_time"]
    if case == "text":
        usage = completion.usage
        assert usage and usage.prompt_tokens == 100 and usage.completion_tokens == 20
        assert usage.prompt_tokens_details and usage.prompt_tokens_details.cached_tokens == 60
        assert usage.completion_tokens_details and usage.completion_tokens_details.reasoning_tokens == 5


@pytest.mark.parametrize("case", SCRIPTS)
def test_openai_streams_are_chat_completion_chunks(api: FakeModelAPI, case: str) -> None:
    api.answer(**SCRIPTS[case])
    body = {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}, **REQUEST}
    chunks = openai_chunks(post(api, "/v1/chat/completions", body).text)
    usage = chunks[-1].usage
    assert usage and chunks[-1].choices == []
    deltas = [chunk.choices[0].delta for chunk in chunks[:-1]]
    assert chunks[-2].choices[0].finish_reason == FINISHES[case]
    assert "".join(d.content or "" for d in deltas) == (SCRIPTS[case].get("content") or "")
    assert "".join(d.refusal or "" for d in deltas) == (SCRIPTS[case].get("refusal") or "")
    if case == "text":
        assert usage.prompt_tokens_details and usage.prompt_tokens_details.cached_tokens == 60
        assert usage.completion_tokens_details and usage.completion_tokens_details.reasoning_tokens == 5
    pieces = [call for d in deltas for call in d.tool_calls or []]
    if case == "tools":
        for index, scripted in enumerate(CALLS):
            mine = [call for call in pieces if call.index == index]
            assert len(mine) > 2  # the head, then the arguments in several pieces
            head, rest = mine[0], mine[1:]
            assert head.id == scripted["id"] and head.function
            assert head.function.name == scripted["function"]["name"]
            assert all(call.id is None and call.function and call.function.name is None for call in rest)
            joined = "".join(call.function.arguments or "" for call in mine if call.function)
            assert json.loads(joined) == json.loads(scripted["function"]["arguments"])


def test_openai_errors_have_openais_shape(api: FakeModelAPI) -> None:
    api.fail(429, retry_after=7)
    api.fail(500)
    limited, broken = (post(api, "/v1/chat/completions", {"model": "gpt-4o", **REQUEST}) for _ in range(2))
    assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
    assert broken.status_code == 500
    for answer in (limited, broken):
        exact(ErrorObject.model_validate(answer.json()["error"]))


# Anthropic -------------------------------------------------------------------------------------

STOPS = {"text": "end_turn", "tools": "tool_use", "refusal": "refusal", "length": "max_tokens"}


@pytest.mark.parametrize("case", SCRIPTS)
def test_anthropic_bodies_are_messages(api: FakeModelAPI, case: str) -> None:
    api.answer(**SCRIPTS[case])
    answer = post(api, "/v1/messages", {"model": "claude-3-5-haiku-20241022", **REQUEST})
    message = Message.model_validate(answer.json())
    exact(message)
    assert message.model == "claude-3-5-haiku-20241022" and message.stop_reason == STOPS[case]
    if case == "tools":
        uses = [(block.id, block.name, block.input) for block in message.content if block.type == "tool_use"]
        assert uses == [
            ("toolu_01A", "get_weather", {"city": "Paris", "days": [1, 2]}),
            ("toolu_01B", "get_time", {"tz": "UTC"}),
        ]
    if case == "refusal":
        assert [block.type for block in message.content] == ["text"]
    if case == "text":
        usage = message.usage  # input_tokens leaves out what was read from or written to the cache
        assert usage.input_tokens == 30 and usage.cache_read_input_tokens == 60
        assert usage.cache_creation_input_tokens == 10
        assert usage.output_tokens == 20 and usage.output_tokens_details
        assert usage.output_tokens_details.thinking_tokens == 5


@pytest.mark.parametrize("case", SCRIPTS)
def test_anthropic_streams_are_message_stream_events(api: FakeModelAPI, case: str) -> None:
    api.answer(**SCRIPTS[case])
    body = {"model": "claude-3-5-haiku-20241022", "stream": True, **REQUEST}
    events = anthropic_events(post(api, "/v1/messages", body).text)
    kinds = [event.type for event in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert events[-2].delta.stop_reason == STOPS[case]
    assert events[-2].usage.output_tokens == SCRIPTS[case].get("completion_tokens", 7)
    deltas = [event for event in events if event.type == "content_block_delta"]
    text = "".join(event.delta.text for event in deltas if event.delta.type == "text_delta")
    assert text == (SCRIPTS[case].get("content") or SCRIPTS[case].get("refusal") or "")
    if case == "text":
        assert events[0].message.usage.cache_read_input_tokens == 60
        assert events[0].message.usage.input_tokens == 30
    if case == "tools":
        starts = [event.content_block for event in events if event.type == "content_block_start"]
        assert [(block.id, block.name) for block in starts] == [
            ("toolu_01A", "get_weather"),
            ("toolu_01B", "get_time"),
        ]
        for index, scripted in enumerate(CALLS):
            mine = [e.delta for e in deltas if e.index == index]
            parts = [delta.partial_json for delta in mine if delta.type == "input_json_delta"]
            assert len([part for part in parts if part]) > 1
            assert json.loads("".join(parts)) == json.loads(scripted["function"]["arguments"])


def test_anthropic_malformed_arguments_stay_representable(api: FakeModelAPI) -> None:
    bad = [tool_call("toolu_01C", "get_time", '{"tz": "UT')]
    api.answer_tool_calls(bad)
    api.answer_tool_calls(bad)
    message = Message.model_validate(post(api, "/v1/messages", {"model": "claude-x", **REQUEST}).json())
    assert [block.input for block in message.content if block.type == "tool_use"] == [{}]
    streamed = post(api, "/v1/messages", {"model": "claude-x", "stream": True, **REQUEST})
    events = anthropic_events(streamed.text)
    parts = [e.delta.partial_json for e in events if e.type == "content_block_delta"]
    assert "".join(parts) == '{"tz": "UT'


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (529, "overloaded_error"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (401, "authentication_error"),
        (400, "invalid_request_error"),
        (404, "not_found_error"),
    ],
)
def test_anthropic_errors_have_anthropics_shape(api: FakeModelAPI, status: int, kind: str) -> None:
    api.fail(status, retry_after=3 if status == 429 else None)
    answer = post(api, "/v1/messages", {"model": "claude-x", **REQUEST})
    error = ErrorResponse.model_validate(answer.json())
    exact(error)
    assert answer.status_code == status and error.error.type == kind and error.error.message
    assert answer.headers.get("retry-after") == ("3" if status == 429 else None)


# Ollama ----------------------------------------------------------------------------------------

COUNTS = (
    "total_duration load_duration prompt_eval_count prompt_eval_duration eval_count eval_duration".split()
)


def ollama_final(line: dict[str, Any], case: str) -> None:
    assert line["done"] is True and line["model"] == "llama3.1" and line["created_at"].endswith("Z")
    assert line["done_reason"] == ("length" if case == "length" else "stop")
    assert all(isinstance(line[key], int) for key in COUNTS)
    assert (line["prompt_eval_count"], line["eval_count"]) == (
        SCRIPTS[case].get("prompt_tokens", 11),
        SCRIPTS[case].get("completion_tokens", 7),
    )


@pytest.mark.parametrize("case", SCRIPTS)
def test_ollama_bodies_have_the_documented_fields(api: FakeModelAPI, case: str) -> None:
    api.answer(**SCRIPTS[case])
    answer = post(api, "/api/chat", {"model": "llama3.1", "stream": False, **REQUEST})
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    ollama_final(body, case)
    message = body["message"]
    assert message["role"] == "assistant" and isinstance(message["content"], str)
    if case == "tools":
        assert message["tool_calls"] == [
            {"function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}},
            {"function": {"name": "get_time", "arguments": {"tz": "UTC"}}},
        ]


@pytest.mark.parametrize("case", SCRIPTS)
def test_ollama_streams_are_ndjson(api: FakeModelAPI, case: str) -> None:
    api.answer(**SCRIPTS[case])
    answer = post(api, "/api/chat", {"model": "llama3.1", **REQUEST})  # Ollama streams unless told not to
    assert answer.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in answer.text.splitlines()]
    *pieces, last = lines
    assert all(line["done"] is False and line["message"]["role"] == "assistant" for line in pieces)
    ollama_final(last, case)
    text = "".join(line["message"]["content"] for line in lines)
    assert text == (SCRIPTS[case].get("content") or SCRIPTS[case].get("refusal") or "")
    calls = [call for line in pieces for call in line["message"].get("tool_calls", [])]
    assert all(isinstance(call["function"]["arguments"], dict) for call in calls)
    assert len(calls) == (2 if case == "tools" else 0)


def test_ollama_errors_are_one_string(api: FakeModelAPI) -> None:
    api.fail(404)
    api.fail(500, message="llama runner process has terminated")
    missing, broken = (post(api, "/api/chat", {"model": "llama3.1", **REQUEST}) for _ in range(2))
    assert missing.status_code == 404
    assert missing.json() == {"error": 'model "llama3.1" not found, try pulling it first'}
    assert broken.status_code == 500 and broken.json() == {"error": "llama runner process has terminated"}
