"""The eval surface's tools: a GitHub or Slack write is recorded and never made, a thread or an
issue is read from the case's fixtures in the real tools' shape, anything else is refused, and
memory tools run as ever. The fixtures come from a stand-in for the database row."""

from __future__ import annotations

from typing import Any

import pytest

from activities.offline.reading import THREAD_HEADER
from activities.tools import eval_tools
from workflows.types import MemoryScopeRef, SurfaceContext, ToolCallInput

NO_RUNTIME: Any = None  # the stand-in for the fixtures row needs no runtime
FIXTURES = {
    "thread": ["Alice (U_ALICE): ship it?", "Bob (U_BOB): agreed"],
    "issues": [{"number": 42, "title": "Flaky deploy step", "body": "Times out on arm64.", "labels": ["ci"]}],
}


def call(tool: str, **arguments: Any) -> ToolCallInput:
    context = SurfaceContext(surface="eval", channel="eval-r-c-1", user="eval-user")
    memory = MemoryScopeRef("default", "helper", "channel", "eval:eval-r-c-1", "offline/hashing-256", 30)
    return ToolCallInput.for_call("task-eval-r-c-1", 1, "c1", tool, arguments, context, memory)


@pytest.fixture(autouse=True)
def fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    async def stored(inp: ToolCallInput, rt: Any) -> dict[str, Any]:
        return FIXTURES

    monkeypatch.setattr(eval_tools, "_fixtures", stored)


async def test_writes_outside_are_recorded_and_memory_runs_as_ever() -> None:
    posted = await eval_tools.eval_tool_result(call("slack.post_message", text="hi"), True, NO_RUNTIME)
    assert posted is not None and posted.ok
    assert posted.output == '[eval] slack.post_message recorded, not sent: {"text": "hi"}'
    assert await eval_tools.eval_tool_result(call("memory.save", content="x"), True, NO_RUNTIME) is None


async def test_reads_answer_from_the_fixtures_in_the_real_tools_shape() -> None:
    thread = await eval_tools.eval_tool_result(call("slack.read_thread"), False, NO_RUNTIME)
    assert thread is not None and THREAD_HEADER.match(thread.output.splitlines()[0])
    assert thread.output.splitlines()[1:] == FIXTURES["thread"]
    issue = await eval_tools.eval_tool_result(
        call("github.get_issue", repo="acme/platform", number=42), False, None
    )
    assert issue is not None and issue.output.startswith("Issue acme/platform#42: Flaky deploy step\n")
    assert "labels: ci" in issue.output and issue.output.endswith("Times out on arm64.")
    found = await eval_tools.eval_tool_result(
        call("github.search_issues", repo="acme/platform", query="arm64"), False, None
    )
    assert found is not None and "#42 [open] (issue) Flaky deploy step" in found.output


async def test_what_the_case_does_not_hold_is_refused_not_fetched() -> None:
    missing = await eval_tools.eval_tool_result(
        call("github.get_issue", repo="acme/platform", number=7), False, None
    )
    assert missing is not None and not missing.ok and missing.error_kind == "not_found"
    logs = await eval_tools.eval_tool_result(
        call("github.get_job_log", repo="acme/platform", job_id=1), False, None
    )
    assert logs is not None and not logs.ok and "has no eval fixture" in logs.output
