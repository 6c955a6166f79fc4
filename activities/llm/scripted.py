"""`scripted/eval`: a model that answers from an eval case's script, for cases that need exact
tool calls. `openloop eval run` stores the case's answers against the task id before the task
starts (`eval_scripts`); the model activity answers with the next one (the count of answers
already in the prompt says which), never from the network. A task with no script, or past
its end, gets a plain reply saying so, so the task finishes instead of looping.
"""

from __future__ import annotations

import json
from typing import Any

from temporalio.exceptions import ApplicationError

from activities.llm.compaction import estimate_tokens
from activities.runtime import runtime
from workflows.errors import ErrorType
from workflows.tool_catalog import model_tool_name
from workflows.types import ModelCallInput, ModelCallResult, ModelUsage, ToolCall

SCRIPTED_PREFIX = "scripted/"
SCRIPT_SQL = "SELECT answers FROM eval_scripts WHERE task_id = %s"
_ENDED = "[scripted model] The script has no answer left."


def answer_index(messages: list[dict[str, Any]]) -> int:
    """Which scripted answer comes next: one per assistant message already in the prompt."""
    return sum(1 for m in messages if m.get("role") == "assistant")


def scripted_reply(answers: list[dict[str, Any]], index: int) -> tuple[str, list[ToolCall]]:
    if index >= len(answers):
        return _ENDED, []
    answer = answers[index]
    calls = [
        ToolCall(f"call_{index}_{n}", model_tool_name(str(c["tool"])), json.dumps(c.get("args") or {}))
        for n, c in enumerate(answer.get("tool_calls") or [])
    ]
    return str(answer.get("text") or ""), calls


async def ask_scripted(inp: ModelCallInput, model: str, messages: list[dict[str, Any]]) -> ModelCallResult:
    """The script's next answer for the task (a summary request is answered without one)."""
    calls: list[ToolCall] = []
    if inp.purpose == "summary":
        text = "[scripted model] Summary of the steps so far."
    else:
        pool = await runtime().pool()
        async with pool.connection() as conn:
            row = await (await conn.execute(SCRIPT_SQL, (inp.task_id,))).fetchone()
        if row is None:
            raise ApplicationError(
                f"{model}: task {inp.task_id} has no script; scripted/eval answers only tasks "
                "started by `openloop eval run` from a case with `scripted:` answers",
                type=ErrorType.MODEL_BAD_REQUEST,
                non_retryable=True,
            )
        answers = row["answers"] if isinstance(row, dict) else row[0]
        text, calls = scripted_reply(list(answers), answer_index(messages))
    completion = estimate_tokens([{"content": text, "tool_calls": [c.arguments for c in calls]}])
    return ModelCallResult(
        text=text,
        tool_calls=calls,
        finish_reason="tool_calls" if calls else "stop",
        usage=ModelUsage(model, estimate_tokens(messages), completion, 0.0),
        transcript_upto=0,
        max_tokens_used=inp.budget.max_tokens,
        offline=True,
    )
