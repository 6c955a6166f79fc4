"""Subagents in the workflow tests: which task is a child, and a model answer that delegates."""

from __future__ import annotations

import json
import re

from workflows.types import ModelCallResult, ModelUsage, ToolCall

# The issue a child asks to open in the task-tree tests (it needs an approval).
ISSUE = json.dumps({"repo": "acme/platform", "title": "Rotate the token"})


def is_child(task_id: str) -> bool:
    """A subagent's id is its parent's, then `-d<step>-<call key>`."""
    return re.search(r"-d\d+-[0-9a-f]{8}-\d{3}$", task_id) is not None


def delegations(count: int) -> ModelCallResult:
    calls = [
        ToolCall("", "agent__delegate", json.dumps({"task": f"look into part {n}"})) for n in range(count)
    ]
    return ModelCallResult("", calls, "tool_calls", ModelUsage("scripted/model", 100, 20, 0.01), 0, 0)
