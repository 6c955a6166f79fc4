"""GitHub issue tools: create_issue, comment, get_issue, search_issues.

Permissions and approvals are checked by the workflow before a handler runs (see
`workflows.tool_catalog`). Writes are exactly-once per idempotency key (`activities.github.once`).
Everything read from GitHub is stripped of hidden content and bounded before the model sees it.
"""

from __future__ import annotations

import re
from typing import Any

from github import Github

from activities.github.client import (
    bounded,
    check_repo,
    github_call,
    strip_hidden,
)
from activities.github.once import comment_once, create_issue_once
from activities.runtime import Runtime
from activities.tool_errors import ToolError, ToolErrorKind
from activities.tools.native import NonEmpty, PositiveInt, ToolArgs, native_tool
from workflows.tool_catalog import WriteBound
from workflows.types import ToolCallInput

MAX_BODY = 4000  # characters of an issue body shown to the model
MAX_COMMENT = 1500
MAX_COMMENTS = 10  # the latest comments of an issue
MAX_SEARCH_RESULTS = 20
MAX_OUTPUT = 12_000


class CreateIssueArgs(ToolArgs):
    repo: NonEmpty
    title: NonEmpty
    body: str = ""
    labels: list[NonEmpty] = []


class CommentArgs(ToolArgs):
    repo: NonEmpty
    number: PositiveInt
    body: NonEmpty


class IssueArgs(ToolArgs):
    repo: NonEmpty
    number: PositiveInt


class SearchIssuesArgs(ToolArgs):
    repo: NonEmpty
    query: NonEmpty


@native_tool(
    "github.create_issue",
    CreateIssueArgs,
    "Open a GitHub issue in a repository.",
    permission="issues:write",
    writes=True,
    bound_argument="repo",
    bound_by=WriteBound.GITHUB_REPOS,
)
async def create_issue(args: CreateIssueArgs, inp: ToolCallInput, rt: Runtime) -> str:
    repo = check_repo(args.repo)
    title = args.title.strip()
    if not title:
        raise ToolError(ToolErrorKind.INVALID, "an issue needs a title")
    written = await create_issue_once(rt, repo, inp.idempotency_key, title, args.body, list(args.labels))
    verb = "Created" if written.created else "Already created"
    return f"{verb} issue #{written.number} in {repo}: {title}\n{written.url}"


@native_tool(
    "github.comment",
    CommentArgs,
    "Comment on a GitHub issue or pull request.",
    permission="issues:write",
    writes=True,
    bound_argument="repo",
    bound_by=WriteBound.GITHUB_REPOS,
)
async def comment(args: CommentArgs, inp: ToolCallInput, rt: Runtime) -> str:
    repo = check_repo(args.repo)
    number = args.number
    body = args.body.strip()
    if not body:
        raise ToolError(ToolErrorKind.INVALID, "a comment needs a body")
    written = await comment_once(rt, repo, f"issue:{number}", body, inp.idempotency_key)
    return f"Commented on {repo}#{number}\n{written.url}"


def _person(item: dict[str, Any]) -> str:
    return str((item.get("user") or {}).get("login") or "unknown")


@native_tool(
    "github.get_issue",
    IssueArgs,
    "Read a GitHub issue or pull request with its latest comments.",
    permission="issues:read",
    writes=False,
)
async def get_issue(args: IssueArgs, inp: ToolCallInput, rt: Runtime) -> str:
    repo = check_repo(args.repo)
    number = args.number

    def read(gh: Github) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        _, issue = gh.requester.requestJsonAndCheck("GET", f"/repos/{repo}/issues/{number}")
        comments: list[dict[str, Any]] = []
        total = int(issue.get("comments") or 0)
        # Comments come oldest first: the latest ones are on the last two pages.
        last_page = -(-total // MAX_COMMENTS)
        for page in range(max(1, last_page - 1), last_page + 1):
            _, batch = gh.requester.requestJsonAndCheck(
                "GET",
                f"/repos/{repo}/issues/{number}/comments",
                parameters={"per_page": MAX_COMMENTS, "page": page},
            )
            comments += batch
        return issue, comments[-MAX_COMMENTS:]

    issue, comments = await github_call(rt.settings, repo, read)
    kind = "Pull request" if "pull_request" in issue else "Issue"
    labels = ", ".join(str(label.get("name")) for label in issue.get("labels") or [])
    lines = [
        f"{kind} {repo}#{number}: {strip_hidden(str(issue.get('title') or ''))}",
        f"State: {issue.get('state')} · author: {_person(issue)} · labels: {labels or 'none'}",
        f"URL: {issue.get('html_url', '')}",
        "",
        bounded(strip_hidden(str(issue.get("body") or "(no description)")), MAX_BODY),
    ]
    if comments:
        lines += ["", f"Latest comments ({len(comments)} of {issue.get('comments')}):"]
    for item in comments:
        association = item.get("author_association", "")
        lines += [
            f"--- {_person(item)} ({association}) at {item.get('created_at', '')}:",
            bounded(strip_hidden(str(item.get("body") or "")), MAX_COMMENT),
        ]
    return bounded("\n".join(lines), MAX_OUTPUT)


@native_tool(
    "github.search_issues",
    SearchIssuesArgs,
    "Search issues in a repository (GitHub search syntax).",
    permission="issues:read",
    writes=False,
)
async def search_issues(args: SearchIssuesArgs, inp: ToolCallInput, rt: Runtime) -> str:
    repo = check_repo(args.repo)
    query = args.query.strip()
    # The search stays inside the repository the model named.
    query = re.sub(r"(?i)\b(repo|org|user):\S+", "", query).strip()

    def search(gh: Github) -> dict[str, Any]:
        _, data = gh.requester.requestJsonAndCheck(
            "GET",
            "/search/issues",
            parameters={"q": f"{query} repo:{repo}".strip(), "per_page": MAX_SEARCH_RESULTS},
        )
        return data

    data = await github_call(rt.settings, repo, search)
    items = data.get("items") or []
    if not items:
        return f"No issues in {repo} match {query!r}."
    lines = [f"{data.get('total_count', len(items))} match(es) in {repo} for {query!r}:"]
    for item in items[:MAX_SEARCH_RESULTS]:
        kind = "PR" if "pull_request" in item else "issue"
        title = strip_hidden(str(item.get("title") or ""))
        lines.append(
            f"#{item.get('number')} [{item.get('state')}] ({kind}) {title}"
            f" — {_person(item)}, updated {item.get('updated_at', '')}"
        )
    return bounded("\n".join(lines), MAX_OUTPUT)
