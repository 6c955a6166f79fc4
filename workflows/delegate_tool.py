"""The `agent.delegate` tool's spec: declared once, pure data (the workflow runs it as a
child workflow; see `workflows.delegation`)."""

from __future__ import annotations

from workflows.tool_catalog import ToolRuns, ToolSpec

DELEGATE_PERMISSION = "agents:delegate"
DELEGATE = ToolSpec(
    name="agent.delegate",
    description=(
        "Hand a self-contained piece of work to a subagent with a fresh context. Say everything "
        "it needs in `task`; it answers once, with what it found. Several calls in one answer "
        "run in parallel."
    ),
    parameters={
        "type": "object",
        "properties": {
            "task": {"type": "string", "minLength": 1, "description": "The work, self-contained"},
            "tools": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "description": "Which of your tools it may use (default: all but delegation)",
            },
        },
        "required": ["task"],
        "additionalProperties": False,
    },
    permission=DELEGATE_PERMISSION,
    writes=False,
    runs=ToolRuns.CHILD,
    source="delegate",
)
