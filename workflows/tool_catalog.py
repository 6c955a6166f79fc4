"""The native tools an agent may be given: name, description, JSON schema, permission scope.

Pure data, so the workflow can validate arguments and check permissions without I/O; the
handlers that run them live in `activities/tools/`. A tool's name and schema are permanent
once released (they are in recorded histories and in agents' YAML).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    parameters: dict[str, Any]
    permission: str  # the scope an agent's spec.tools[].permissions must grant
    writes: bool  # side-effecting: runs with an idempotency key
    # Fast calls to our own database run as local activities: no extra round trip through
    # the server; a local one that only reads runs inside the next model call when it needs
    # no approval. Calls to outside services (which can be slow or rate limited) stay remote.
    local: bool = False

    def openai_schema(self) -> dict[str, Any]:
        """The tool as a model sees it (OpenAI function-calling format, used by LiteLLM)."""
        return {
            "type": "function",
            "function": {
                "name": self.name.replace(".", "__"),
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_STR = {"type": "string", "minLength": 1}
_INT = {"type": "integer", "minimum": 1}

NATIVE_TOOLS: dict[str, ToolDefinition] = {
    tool.name: tool
    for tool in (
        ToolDefinition(
            "memory.search",
            "Search this agent's memory (scoped to the channel or agent) for earlier decisions.",
            _object({"query": _STR, "k": {"type": "integer", "minimum": 1, "maximum": 20}}, ["query"]),
            "memory:read",
            writes=False,
            local=True,
        ),
        ToolDefinition(
            "memory.save",
            "Save a decision or fact to memory so later tasks can recall it.",
            _object({"content": _STR}, ["content"]),
            "memory:write",
            writes=True,
            local=True,
        ),
        ToolDefinition(
            "slack.read_thread",
            "Read every message of the current Slack thread, with user names.",
            _object({"channel": _STR, "thread_ts": _STR}, []),
            "channels:history",
            writes=False,
        ),
        ToolDefinition(
            "slack.post_message",
            "Post a message to a Slack channel or thread.",
            _object({"channel": _STR, "text": _STR, "thread_ts": _STR}, ["text"]),
            "chat:write",
            writes=True,
        ),
        ToolDefinition(
            "github.create_issue",
            "Open a GitHub issue in a repository.",
            _object(
                {
                    "repo": _STR,
                    "title": _STR,
                    "body": {"type": "string"},
                    "labels": {"type": "array", "items": _STR},
                },
                ["repo", "title"],
            ),
            "issues:write",
            writes=True,
        ),
        ToolDefinition(
            "github.comment",
            "Comment on a GitHub issue or pull request.",
            _object({"repo": _STR, "number": _INT, "body": _STR}, ["repo", "number", "body"]),
            "issues:write",
            writes=True,
        ),
        ToolDefinition(
            "github.get_issue",
            "Read a GitHub issue or pull request with its latest comments.",
            _object({"repo": _STR, "number": _INT}, ["repo", "number"]),
            "issues:read",
            writes=False,
        ),
        ToolDefinition(
            "github.search_issues",
            "Search issues in a repository (GitHub search syntax).",
            _object({"repo": _STR, "query": _STR}, ["repo", "query"]),
            "issues:read",
            writes=False,
        ),
        ToolDefinition(
            "github.list_failed_runs",
            "List recent failed workflow runs of a repository, optionally for one branch.",
            _object({"repo": _STR, "branch": _STR}, ["repo"]),
            "actions:read",
            writes=False,
        ),
        ToolDefinition(
            "github.get_job_log",
            "Read the tail of a workflow job's log (bounded).",
            _object(
                {"repo": _STR, "job_id": _INT, "tail_lines": {"type": "integer", "minimum": 1}},
                ["repo", "job_id"],
            ),
            "actions:read",
            writes=False,
        ),
    )
}


def model_tool_name(name: str) -> str:
    """`github.create_issue` -> `github__create_issue`: providers allow only [a-zA-Z0-9_-]."""
    return name.replace(".", "__")


def catalog_tool_name(model_name: str) -> str:
    return model_name.replace("__", ".")
