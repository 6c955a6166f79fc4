"""The GitHub surface's side of the surface activities (dispatched from activities/surface_activities.py).

A task started from GitHub answers where it was asked: a comment on the issue or pull
request (`context.channel` = "owner/repo", `context.thread` = its number). A CI
investigation (`context.reply_target` = the head commit sha) reports where the agent's
`spec.surfaces.github.ci.report_to` says: the pull request, the commit, and/or the agent's
first Slack channel. Every comment is written once per idempotency key (hidden marker).
Comment bodies are built by pure functions at the top of this module, an approval's in
`activities.github.approval_card`. An approval is also asked in the agent's first Slack
channel, and both messages show the decision (`activities.github.approval_slack`).

The final answer is never lost to a target that is gone (an issue, pull request or commit
GitHub answers 404 for): it falls back to the commit, then the agent's first Slack channel,
then a new issue in the repository, and `post_reply` does not fail for it. A comment deleted
after it was written is written again (`activities.github.once`). An approval comment that
already shows a decision (after `temporal workflow reset` re-runs the step that asked) is
never reused for a pending request: a fresh one is posted.
"""

from __future__ import annotations

import hashlib
import importlib
import logging

from temporalio.exceptions import ApplicationError

from activities.github import approval_slack
from activities.github.approval_card import approval_body, resolved_body, shows_decision
from activities.github.client import bounded, github_call, with_marker
from activities.github.once import Written, comment_once, create_issue_once, edit_comment, fetch_row
from activities.runtime import Runtime
from activities.store.agents import agent_for_github_repo
from activities.tool_errors import ToolError
from workflows.errors import ErrorType
from workflows.types import (
    PostApprovalRequestInput,
    PostApprovalRequestResult,
    PostReplyInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
    TaskStatus,
)

log = logging.getLogger(__name__)

MAX_COMMENT = 60_000  # GitHub refuses bodies over 65,536 characters
# A request asked again after its comment was decided gets a fresh comment under the next
# key; each `temporal workflow reset` past the approval step adds one, so this is generous.
MAX_APPROVAL_COMMENTS = 50


# Comment bodies (pure) ---------------------------------------------------------------------


def reply_body(text: str, status: TaskStatus) -> str:
    body = bounded(text.strip() or "(no reply)", MAX_COMMENT)
    if status == TaskStatus.WAITING_USER:
        body += "\n\n_Reply in this thread to answer; no mention needed._"
    return body


def fallback_issue(repo: str, context: SurfaceContext, text: str) -> tuple[str, str]:
    """Title and body of the issue an answer goes to when nothing else can take it."""
    where = f"#{context.thread}" if context.thread else (context.reply_target or "")[:12]
    title = f"OpenLoop answer for {repo} {where}".strip()
    note = f"_Posted as a new issue: {where or 'the place it was asked'} could not take a comment._"
    return title, bounded(f"{text.strip() or '(no reply)'}\n\n{note}", MAX_COMMENT)


# Where a task answers ----------------------------------------------------------------------


def _repo(context: SurfaceContext) -> str:
    if "/" not in context.channel:
        raise ApplicationError(
            f"GitHub context has no repository (channel={context.channel!r})",
            type=ErrorType.TOOL_CONFIG_ERROR,
            non_retryable=True,
        )
    return context.channel


async def _report_to(rt: Runtime, repo: str) -> tuple[list[str], list[str]]:
    """The agent's CI `report_to` and Slack channels (looked up by repository)."""
    agent = await agent_for_github_repo(await rt.pool(), repo)
    github = agent.config.spec.surfaces.github if agent else None
    report_to: list[str] = list(github.ci.report_to) if github else ["pr_comment"]
    slack = agent.config.spec.surfaces.slack if agent else None
    return report_to, list(slack.channels) if slack else []


async def _targets(rt: Runtime, context: SurfaceContext) -> tuple[list[str], str | None]:
    """GitHub targets ("issue:N" / "commit:sha") and a Slack channel, if any."""
    if context.reply_target is None:
        if not context.thread:
            raise ApplicationError(
                "GitHub task has no issue or pull request to answer on",
                type=ErrorType.TOOL_CONFIG_ERROR,
                non_retryable=True,
            )
        return [f"issue:{context.thread}"], None
    report_to, slack_channels = await _report_to(rt, _repo(context))
    targets: list[str] = []
    if "pr_comment" in report_to and context.thread:
        targets.append(f"issue:{context.thread}")
    if "commit_comment" in report_to or ("pr_comment" in report_to and not context.thread):
        targets.append(f"commit:{context.reply_target}")
    slack = slack_channels[0] if "slack" in report_to and slack_channels else None
    return targets, slack


async def _written(rt: Runtime, repo: str, target: str, body: str, key: str) -> Written:
    try:
        return await comment_once(rt, repo, target, body, key)
    except ToolError as exc:  # 404/422 here will not heal by retrying
        raise ApplicationError(str(exc), type=ErrorType.GITHUB_REQUEST_REJECTED, non_retryable=True) from exc


def _ref(target: str, written: Written) -> str:
    return f"{target.split(':')[0]}:{written.number}"


async def _comment(rt: Runtime, repo: str, target: str, body: str, key: str) -> str:
    return _ref(target, await _written(rt, repo, target, body, key))


async def _try_comment(rt: Runtime, repo: str, target: str, body: str, key: str) -> bool:
    """Comment once; False when GitHub refuses the target (gone, locked, invalid)."""
    try:
        await comment_once(rt, repo, target, body, key)
    except ToolError as exc:
        log.warning("reply not posted on %s %s: %s", repo, target, exc)
        return False
    return True


async def _to_slack(inp: PostReplyInput, channel: str, rt: Runtime, fallback: bool = False) -> bool:
    """Send the answer to a Slack channel, top level; False when Slack cannot take it."""
    try:
        slack_surface = importlib.import_module("activities.slack.surface")
    except ModuleNotFoundError:
        log.warning("answer for %s not sent to Slack: the Slack surface is not installed", inp.task_id)
        return False
    repo, sha = inp.context.channel, inp.context.reply_target or ""
    where = f"#{inp.context.thread}" if inp.context.thread else sha[:12]
    if inp.context.reply_target is None:
        header = f"Answer for {repo} {where} (GitHub could not take the comment):"
    elif fallback:
        header = f"CI report for {repo} {where} (GitHub could not take the comment):"
    else:
        header = f"CI report for {repo} {where}:"
    slack_context = SurfaceContext(
        surface="slack", channel=channel, user=inp.context.user, event_id=inp.context.event_id
    )
    try:
        await slack_surface.post_reply(
            PostReplyInput(
                task_id=inp.task_id,
                context=slack_context,
                text=f"{header}\n{inp.text}",
                status=inp.status,
                step=inp.step,
            ),
            rt,
        )
    except ApplicationError as exc:
        if not exc.non_retryable:
            raise
        log.warning("answer for %s not sent to Slack %s: %s", inp.task_id, channel, exc)
        return False
    return True


async def _fall_back(inp: PostReplyInput, rt: Runtime, key: str, tried: list[str], slack: str | None) -> None:
    """Nowhere asked for took the answer: the commit, the agent's first Slack channel, then a
    new issue in the repository. Only when all of these refuse is it left to the task's result
    (and transcript), logged; the activity does not fail for it."""
    repo, context = inp.context.channel, inp.context
    commit = f"commit:{context.reply_target}" if context.reply_target else None
    if commit is not None and commit not in tried:
        if await _try_comment(rt, repo, commit, reply_body(inp.text, inp.status), f"{key}:{commit}"):
            return
    if slack is None:
        _, channels = await _report_to(rt, repo)
        if channels and await _to_slack(inp, channels[0], rt, fallback=True):
            return
    title, body = fallback_issue(repo, context, inp.text)
    try:
        await create_issue_once(rt, repo, f"{key}:issue", title, body, [])
        return
    except ToolError as exc:
        log.error("answer of %s could not be posted anywhere (%s): %s", inp.task_id, repo, exc)


# The four surface functions ----------------------------------------------------------------


async def task_started(inp: PostReplyInput, rt: Runtime) -> None:
    """React with 👀 to the comment that started the task (GitHub keeps one reaction per user)."""
    if not inp.context.event_id:
        return
    pool = await rt.pool()
    async with pool.connection() as conn:
        row = await fetch_row(
            conn,
            "SELECT reaction_path FROM github_deliveries WHERE delivery_id = %s",
            (inp.context.event_id,),
        )
    if not row or not row["reaction_path"]:
        return
    repo, path = _repo(inp.context), row["reaction_path"]
    try:
        await github_call(
            rt.settings,
            repo,
            lambda gh: gh.requester.requestJsonAndCheck(
                "POST", f"/repos/{repo}/{path}/reactions", input={"content": "eyes"}
            ),
        )
    except ToolError as exc:  # the comment was deleted, or reactions are not allowed: no matter
        log.info("no reaction for %s: %s", inp.task_id, exc)


async def post_reply(inp: PostReplyInput, rt: Runtime) -> None:
    repo = _repo(inp.context)
    digest = hashlib.sha256(inp.text.encode()).hexdigest()[:16]
    key = f"{inp.task_id}:reply:{inp.step}:{inp.status.value}:{digest}"
    targets, slack = await _targets(rt, inp.context)
    body = reply_body(inp.text, inp.status)
    delivered = False
    for target in targets:
        delivered = await _try_comment(rt, repo, target, body, f"{key}:{target}") or delivered
    if slack:
        delivered = await _to_slack(inp, slack, rt) or delivered
    if not delivered:
        await _fall_back(inp, rt, key, targets, slack)


async def post_approval_request(inp: PostApprovalRequestInput, rt: Runtime) -> PostApprovalRequestResult:
    """The approval comment, and the same card in the agent's first Slack channel."""
    repo = _repo(inp.context)
    targets, _ = await _targets(rt, inp.context)
    _, slack_channels = await _report_to(rt, repo)
    slack_ref = await approval_slack.post_card(inp, slack_channels[0], rt) if slack_channels else None
    if not targets:
        return PostApprovalRequestResult(message_ref=approval_slack.join_refs(None, slack_ref))
    body = approval_body(inp.task_id, inp.agent_name, inp.request)
    base = f"{inp.task_id}:approval:{inp.request.request_id}"
    for n in range(MAX_APPROVAL_COMMENTS):
        written = await _written(rt, repo, targets[0], body, base if n == 0 else f"{base}:{n}")
        if not shows_decision(written.body):
            return PostApprovalRequestResult(
                message_ref=approval_slack.join_refs(_ref(targets[0], written), slack_ref)
            )
    raise ApplicationError(
        f"request {inp.request.request_id} of {inp.task_id} was decided {MAX_APPROVAL_COMMENTS} "
        "times already; it is not asked again",
        type=ErrorType.GITHUB_REQUEST_REJECTED,
        non_retryable=True,
    )


async def resolve_approval_request(inp: ResolveApprovalRequestInput, rt: Runtime) -> None:
    github_ref, slack_ref = approval_slack.split_refs(inp.message_ref)
    if slack_ref:
        await approval_slack.resolve_card(inp, slack_ref, rt)
    if not github_ref:
        return
    repo = _repo(inp.context)
    key = f"{inp.task_id}:approval:{inp.request.request_id}"
    try:
        await edit_comment(rt, repo, github_ref, with_marker(resolved_body(inp.task_id, inp), key))
    except ToolError as exc:  # the comment was deleted meanwhile: nothing left to update
        log.info("approval comment for %s not updated: %s", inp.task_id, exc)
