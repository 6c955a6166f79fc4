"""The model activity run the way the workflow runs it, for the tests that call it directly: a
call's input for a task whose row of constants (agent `helper`, MODEL) is stored first, the
activity run in `ActivityEnvironment`, and rows read back from Postgres."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.llm.model_activities import call_model
from activities.runtime import runtime
from activities.store.store_activities import save_task_constants
from workflows.task_constants import SaveTaskConstantsInput, TaskConstants
from workflows.types import (
    BudgetGrant,
    ChatMessage,
    ModelCallInput,
    ModelCallResult,
    TranscriptCursor,
    TranscriptView,
)

MODEL = "openai/gpt-4o-mini"
SYSTEM = "You are the agent 'helper'. Answer briefly."
REQUEST = "What is the status of the deploy?"


ROWS: dict[str, TaskConstants] = {}  # the rows of constants `run` stores before a call
ROW_FIELDS = (
    *("agent_name", "workspace", "channel", "surface", "on_exceeded", "monthly_usd", "context_window"),
    *("context", "memory"),  # where folded tool calls act
)


def call_input(**overrides: Any) -> ModelCallInput:
    """A call of a task whose row of constants (agent `helper`, MODEL, no tools unless
    `models` and `tool_names` say otherwise) `run` stores first, as the workflow does."""
    task_id = overrides.pop("task_id", f"task-{uuid.uuid4().hex[:12]}")
    models = overrides.pop("models", [MODEL])
    row = {name: overrides.pop(name) for name in ROW_FIELDS if name in overrides}
    ROWS[task_id] = constants(
        models=models, summary_models=models, tool_names=overrides.pop("tool_names", []), **row
    )
    cursor = TranscriptCursor(
        overrides.pop("transcript_upto", 0),
        overrides.pop("new_messages", [ChatMessage("system", SYSTEM), ChatMessage("user", REQUEST)]),
        overrides.pop("view", TranscriptView()),
    )
    grant = BudgetGrant(
        overrides.pop("max_tokens", 512),
        overrides.pop("usd_headroom", 1.0),
        overrides.pop("token_headroom", 100_000),
    )
    step = overrides.pop("step", 1)
    return ModelCallInput(
        task_id=task_id, step=step, cursor=cursor, budget=grant, model=models[0], **overrides
    )


async def run(inp: ModelCallInput, env: ActivityEnvironment | None = None) -> ModelCallResult:
    if (row := ROWS.pop(inp.task_id, None)) is not None:
        await save_task_constants(SaveTaskConstantsInput(inp.task_id, row))
    return await (env or ActivityEnvironment()).run(call_model, inp)


async def rows(sql: str, *params: Any) -> list[dict[str, Any]]:
    pool = await runtime().pool()
    async with pool.connection() as conn:
        found: list[dict[str, Any]] = await (await conn.execute(sql, params)).fetchall()  # type: ignore[assignment]
        return found


def constants(**overrides: Any) -> TaskConstants:
    values: dict[str, Any] = {
        "agent_name": "helper",
        "workspace": "acme",
        "channel": "C0DEPLOY",
        "surface": "slack",
        "models": [MODEL],
        "summary_models": [MODEL],
        "tool_names": ["memory.search"],
        "on_exceeded": "block",
    }
    values.update(overrides)
    return TaskConstants(**values)
