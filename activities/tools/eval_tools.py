"""What a tool call does on the eval surface (`openloop eval run`): nothing outside OpenLoop
is reached. A write to GitHub or Slack is recorded in the task's history and audit, never
made; a read of a Slack thread or a GitHub issue is answered from the case's fixtures, which
`openloop eval run` stores against the task id before the task starts (`eval_scripts`), in
the shape the real tool answers in. Any other GitHub or Slack call is refused, saying so.
Memory tools run as ever: an eval task's memory is its own channel's.
"""

from __future__ import annotations

import json
from typing import Any

from activities.runtime import Runtime
from activities.tool_errors import ToolError, ToolErrorKind
from workflows.types import ToolCallInput, ToolCallResult

__all__ = ["OUTSIDE", "eval_tool_result"]

OUTSIDE = ("github.", "slack.")  # the tools that reach a system outside OpenLoop
FIXTURES_SQL = "SELECT fixtures FROM eval_scripts WHERE task_id = %s"


async def _fixtures(inp: ToolCallInput, rt: Runtime) -> dict[str, Any]:
    pool = await rt.pool()
    async with pool.connection() as conn:
        row = await (await conn.execute(FIXTURES_SQL, (inp.task_id,))).fetchone()
    if row is None:
        return {}
    found = row["fixtures"] if isinstance(row, dict) else row[0]
    return dict(found or {})


def _thread(inp: ToolCallInput, fixtures: dict[str, Any]) -> str:
    lines = [str(line) for line in fixtures.get("thread") or []]
    if not lines:
        raise ToolError(ToolErrorKind.NOT_FOUND, "this eval case gives no thread (context.thread)")
    thread = inp.context.thread or "eval"
    return "\n".join([f"Thread {thread} in {inp.context.channel}: {len(lines)} message(s)", *lines])


def _issue(inp: ToolCallInput, fixtures: dict[str, Any]) -> str:
    repo, number = str(inp.arguments.get("repo") or ""), inp.arguments.get("number")
    for issue in fixtures.get("issues") or []:
        if issue["number"] == number and issue.get("repo") in (None, repo):
            labels = ", ".join(issue.get("labels") or []) or "none"
            state, author = issue.get("state", "open"), issue.get("author", "eval")
            lines = [
                f"Issue {repo}#{number}: {issue['title']}",
                f"State: {state} · author: {author} · labels: {labels}",
                f"URL: https://github.com/{repo}/issues/{number}",
                "",
                issue.get("body") or "(no description)",
            ]
            comments = issue.get("comments") or []
            if comments:
                lines += ["", f"Latest comments ({len(comments)} of {len(comments)}):"]
            for comment in comments:
                lines += ["--- eval (MEMBER):", str(comment)]
            return "\n".join(lines)
    raise ToolError(
        ToolErrorKind.NOT_FOUND, f"{repo}#{number}: no such issue in this eval case (context.issues)"
    )


def _search(inp: ToolCallInput, fixtures: dict[str, Any]) -> str:
    repo, query = str(inp.arguments.get("repo") or ""), str(inp.arguments.get("query") or "")
    words = [w.lower() for w in query.split() if ":" not in w]
    found = [
        issue
        for issue in fixtures.get("issues") or []
        if issue.get("repo") in (None, repo)
        and all(w in f"{issue['title']} {issue.get('body') or ''}".lower() for w in words)
    ]
    if not found:
        return f"No issues in {repo} match {query!r}."
    lines = [f"{len(found)} match(es) in {repo} for {query!r}:"]
    lines += [f"#{i['number']} [{i.get('state', 'open')}] (issue) {i['title']} — eval" for i in found]
    return "\n".join(lines)


_READS = {"slack.read_thread": _thread, "github.get_issue": _issue, "github.search_issues": _search}


async def eval_tool_result(inp: ToolCallInput, writes: bool, rt: Runtime) -> ToolCallResult | None:
    """The result of `inp` on the eval surface, or None when the tool runs as ever (memory)."""
    if not inp.tool.startswith(OUTSIDE):
        return None
    if writes:
        sent = json.dumps(inp.arguments, sort_keys=True)
        return ToolCallResult(ok=True, output=f"[eval] {inp.tool} recorded, not sent: {sent}")
    read = _READS.get(inp.tool)
    try:
        if read is None:
            raise ToolError(
                ToolErrorKind.NOT_FOUND,
                f"{inp.tool} has no eval fixture; evals answer only {', '.join(_READS)}",
            )
        return ToolCallResult(ok=True, output=read(inp, await _fixtures(inp, rt)))
    except ToolError as err:
        return ToolCallResult(ok=False, output=f"Error ({err.kind}): {err}", error_kind=err.kind.value)
