"""The native tools as tasks started before tool specs travelled in the task input saw them.

Frozen: a task in flight that was started without `TaskInput.tools` keeps deciding with
exactly these (the names, schemas, permissions and places that were released), so its
history replays. New tasks get their specs from the catalog in `activities/tools/`; never
edit this table, as with a database migration.
"""

from __future__ import annotations

from typing import Any

from workflows.tool_catalog import ToolRuns, ToolSpec, WriteBound


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_STR = {"type": "string", "minLength": 1}
_INT = {"type": "integer", "minimum": 1}

LEGACY_NATIVE_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "memory.search",
        "Search this agent's memory (scoped to the channel or agent) for earlier decisions.",
        _object({"query": _STR, "k": {"type": "integer", "minimum": 1, "maximum": 20}}, ["query"]),
        "memory:read",
        writes=False,
        runs=ToolRuns.LOCAL,
    ),
    ToolSpec(
        "memory.save",
        "Save a decision or fact to memory so later tasks can recall it.",
        _object({"content": _STR}, ["content"]),
        "memory:write",
        writes=True,
        runs=ToolRuns.LOCAL,
    ),
    ToolSpec(
        "slack.read_thread",
        "Read every message of the current Slack thread, with user names.",
        _object({"channel": _STR, "thread_ts": _STR}, []),
        "channels:history",
        writes=False,
    ),
    ToolSpec(
        "slack.post_message",
        "Post a message to a Slack channel or thread.",
        _object({"channel": _STR, "text": _STR, "thread_ts": _STR}, ["text"]),
        "chat:write",
        writes=True,
        bound_argument="channel",
        bound_by=WriteBound.SLACK_CHANNELS,
    ),
    ToolSpec(
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
        bound_argument="repo",
        bound_by=WriteBound.GITHUB_REPOS,
    ),
    ToolSpec(
        "github.comment",
        "Comment on a GitHub issue or pull request.",
        _object({"repo": _STR, "number": _INT, "body": _STR}, ["repo", "number", "body"]),
        "issues:write",
        writes=True,
        bound_argument="repo",
        bound_by=WriteBound.GITHUB_REPOS,
    ),
    ToolSpec(
        "github.get_issue",
        "Read a GitHub issue or pull request with its latest comments.",
        _object({"repo": _STR, "number": _INT}, ["repo", "number"]),
        "issues:read",
        writes=False,
    ),
    ToolSpec(
        "github.search_issues",
        "Search issues in a repository (GitHub search syntax).",
        _object({"repo": _STR, "query": _STR}, ["repo", "query"]),
        "issues:read",
        writes=False,
    ),
    ToolSpec(
        "github.list_failed_runs",
        "List recent failed workflow runs of a repository, optionally for one branch.",
        _object({"repo": _STR, "branch": _STR}, ["repo"]),
        "actions:read",
        writes=False,
    ),
    ToolSpec(
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
