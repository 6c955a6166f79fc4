"""Exactly-once writes to GitHub, which has no idempotency keys of its own.

An issue or comment is written at most once per idempotency key, even when an attempt timed
out after GitHub had accepted it:

1. the key is claimed in Postgres (`github_issue_claims` / `github_comment_claims`);
2. the body carries a hidden marker naming the key;
3. a later attempt that finds the claim but no recorded number looks for the marker
   (issues only, pull requests filtered out) before writing anything;
4. the number/id is recorded once known, so later retries need no lookup at all.

A comment that was deleted after it was written (its recorded id answers 404) is written
again, and the new id recorded: what the task said is never lost to a deleted comment.

An attempt's HTTP timeout is far shorter than its activity timeout, so when Temporal starts
the next attempt the previous request has finished (or been given up) on our side.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from github import Github, GithubException
from psycopg import AsyncConnection

from activities.github.client import github_call, marker, with_marker
from activities.runtime import Runtime

# GitHub's clock and ours may differ: look back further than the claim itself.
CLOCK_SKEW = timedelta(minutes=10)
SCAN_PAGES = 3  # up to 300 recent issues/comments are searched for a marker
PER_PAGE = 100


@dataclass(frozen=True)
class Written:
    number: int  # the issue number, or the comment id
    url: str
    created: bool  # False when an earlier attempt had already written it
    body: str = ""  # the comment's body as GitHub has it now (comments only)


async def fetch_row(
    conn: AsyncConnection[Any], sql: str, params: tuple[object, ...]
) -> dict[str, Any] | None:
    """One row as a dict (the pool's connections use dict rows), or None."""
    cursor = await conn.execute(sql, params)  # type: ignore[arg-type]
    return cast("dict[str, Any] | None", await cursor.fetchone())


def _since(claimed_at: datetime) -> str:
    return (claimed_at - CLOCK_SKEW).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pages(gh: Github, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in range(1, SCAN_PAGES + 1):
        _, data = gh.requester.requestJsonAndCheck(
            "GET", path, parameters={**params, "per_page": PER_PAGE, "page": page}
        )
        batch = data if isinstance(data, list) else []
        items += batch
        if len(batch) < PER_PAGE:
            break
    return items


async def create_issue_once(
    rt: Runtime, repo: str, key: str, title: str, body: str, labels: list[str]
) -> Written:
    pool = await rt.pool()
    async with pool.connection() as conn:
        fresh = await fetch_row(
            conn,
            "INSERT INTO github_issue_claims (idempotency_key, repo) VALUES (%s, %s)"
            " ON CONFLICT (idempotency_key) DO NOTHING RETURNING claimed_at",
            (key, repo),
        )
        claimed_at: datetime | None = None
        number: int | None = None
        if fresh is None:
            row = await fetch_row(
                conn,
                "SELECT repo, issue_number, claimed_at FROM github_issue_claims WHERE idempotency_key = %s",
                (key,),
            )
            assert row is not None
            repo, claimed_at, number = row["repo"], row["claimed_at"], row["issue_number"]
    mark = marker(key)

    def write(gh: Github) -> tuple[int, str, bool]:
        if number is not None:
            _, found = gh.requester.requestJsonAndCheck("GET", f"/repos/{repo}/issues/{number}")
            return number, str(found.get("html_url", "")), False
        if claimed_at is not None:
            # An earlier attempt may have been accepted after its response was lost.
            params = {"state": "all", "sort": "created", "direction": "desc", "since": _since(claimed_at)}
            for item in _pages(gh, f"/repos/{repo}/issues", params):
                if "pull_request" not in item and mark in (item.get("body") or ""):
                    return int(item["number"]), str(item.get("html_url", "")), False
        issue = gh.get_repo(repo).create_issue(title=title, body=with_marker(body, key), labels=labels)
        return issue.number, issue.html_url, True

    number_, url, created = await github_call(rt.settings, repo, write)
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE github_issue_claims SET issue_number = %s WHERE idempotency_key = %s",
            (number_, key),
        )
    return Written(number_, url, created)


def _comments_path(repo: str, target: str) -> str:
    kind, _, ref = target.partition(":")
    return (
        f"/repos/{repo}/issues/{ref}/comments" if kind == "issue" else f"/repos/{repo}/commits/{ref}/comments"
    )


async def comment_once(rt: Runtime, repo: str, target: str, body: str, key: str) -> Written:
    """Comment on `target` ("issue:12" for an issue or PR, "commit:<sha>") once per key."""
    pool = await rt.pool()
    async with pool.connection() as conn:
        fresh = await fetch_row(
            conn,
            "INSERT INTO github_comment_claims (idempotency_key, repo, target) VALUES (%s, %s, %s)"
            " ON CONFLICT (idempotency_key) DO NOTHING RETURNING claimed_at",
            (key, repo, target),
        )
        claimed_at: datetime | None = None
        known: int | None = None
        if fresh is None:
            row = await fetch_row(
                conn,
                "SELECT claimed_at, comment_id FROM github_comment_claims WHERE idempotency_key = %s",
                (key,),
            )
            assert row is not None
            claimed_at, known = row["claimed_at"], row["comment_id"]
    mark = marker(key)
    path = _comments_path(repo, target)

    def write(gh: Github) -> tuple[int, str, bool, str]:
        if known is not None:
            kind = "issues/comments" if target.startswith("issue:") else "comments"
            try:
                _, found = gh.requester.requestJsonAndCheck("GET", f"/repos/{repo}/{kind}/{known}")
                return known, str(found.get("html_url", "")), False, str(found.get("body") or "")
            except GithubException as exc:
                if exc.status not in (404, 410):
                    raise
                # Deleted since it was written: write it again (below) and record the new id.
        elif claimed_at is not None:
            params = {} if target.startswith("commit:") else {"since": _since(claimed_at)}
            for item in _pages(gh, path, params):
                if mark in (item.get("body") or ""):
                    return int(item["id"]), str(item.get("html_url", "")), False, str(item["body"])
        text = with_marker(body, key)
        _, data = gh.requester.requestJsonAndCheck("POST", path, input={"body": text})
        return int(data["id"]), str(data.get("html_url", "")), True, text

    comment_id, url, created, now_body = await github_call(rt.settings, repo, write)
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE github_comment_claims SET comment_id = %s WHERE idempotency_key = %s",
            (comment_id, key),
        )
    return Written(comment_id, url, created, now_body)


async def edit_comment(rt: Runtime, repo: str, message_ref: str, body: str) -> None:
    """Replace a comment's body; `message_ref` is what `comment_once` callers stored."""
    kind, _, comment_id = message_ref.partition(":")
    path = (
        f"/repos/{repo}/issues/comments/{comment_id}"
        if kind == "issue"
        else f"/repos/{repo}/comments/{comment_id}"
    )
    await github_call(
        rt.settings, repo, lambda gh: gh.requester.requestJsonAndCheck("PATCH", path, input={"body": body})
    )
