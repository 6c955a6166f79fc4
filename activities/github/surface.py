"""The GitHub surface's side of the surface activities (dispatched from activities/surface_activities.py).

A task started from GitHub answers where it was asked: a comment on the issue or pull
request (`context.channel` = "owner/repo", `context.thread` = its number). A CI
investigation (`context.reply_target` = the head commit sha) reports where the agent's
`spec.surfaces.github.ci.report_to` says: the pull request, the commit, and/or the agent's
first Slack channel. Every comment is written once per idempotency key (hidden marker).
Comment bodies are built by pure functions at the top of this module.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging

from temporalio.exceptions import ApplicationError

from activities.github.client import bounded, github_call, with_marker
from activities.github.once import comment_once, edit_comment, fetch_row
from activities.runtime import Runtime
from activities.store.agents import agent_for_github_repo
from activities.tools.registry import ToolError
from workflows.types import (
    ApprovalRequest,
    PostApprovalRequestInput,
    PostApprovalRequestResult,
    PostReplyInput,
    ResolveApprovalRequestInput,
    SurfaceContext,
    TaskStatus,
)

log = logging.getLogger(__name__)

MAX_COMMENT = 60_000  # GitHub refuses bodies over 65,536 characters
MAX_ARGS = 3_000


# Comment bodies (pure) ---------------------------------------------------------------------


def reply_body(text: str, status: TaskStatus) -> str:
    body = bounded(text.strip() or "(no reply)", MAX_COMMENT)
    if status == TaskStatus.WAITING_USER:
        body += "\n\n_Reply in this thread to answer; no mention needed._"
    return body


def _arguments(arguments: dict[str, object]) -> str:
    return bounded(json.dumps(arguments, indent=2, sort_keys=True, default=str), MAX_ARGS)


def approval_body(task_id: str, agent: str, request: ApprovalRequest) -> str:
    approvers = ", ".join(f"`{a}`" for a in request.approvers) or "none named"
    return (
        f"**Approval needed**: agent `{agent}` wants to run `{request.tool}`:\n\n"
        f"```json\n{_arguments(request.arguments)}\n```\n\n"
        f"Model: `{request.model}` · estimated cost: ${request.estimated_cost_usd:.4f}"
        f" · expires: {request.expires_at_iso}\n"
        f"Approvers: {approvers}\n\n"
        f"Approve with `openloop approve {task_id}` or deny with `openloop deny {task_id}`."
    )


def resolved_body(task_id: str, inp: ResolveApprovalRequestInput) -> str:
    who = f" by `{inp.decided_by}`" if inp.decided_by else ""
    return (
        f"**Approval {inp.outcome}**{who} at {inp.decided_at_iso}: `{inp.request.tool}` "
        f"for task `{task_id}`.\n\n```json\n{_arguments(inp.request.arguments)}\n```"
    )


# Where a task answers ----------------------------------------------------------------------


def _repo(context: SurfaceContext) -> str:
    if "/" not in context.channel:
        raise ApplicationError(
            f"GitHub context has no repository (channel={context.channel!r})",
            type="ToolConfigError",
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
                type="ToolConfigError",
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


async def _comment(rt: Runtime, repo: str, target: str, body: str, key: str) -> str:
    try:
        written = await comment_once(rt, repo, target, body, key)
    except ToolError as exc:  # 404/422 here will not heal by retrying
        raise ApplicationError(str(exc), type="GitHubRequestRejected", non_retryable=True) from exc
    return f"{target.split(':')[0]}:{written.number}"


async def _to_slack(inp: PostReplyInput, channel: str, rt: Runtime) -> None:
    try:
        slack_surface = importlib.import_module("activities.slack.surface")
    except ModuleNotFoundError:
        log.warning("CI report for %s not sent to Slack: the Slack surface is not installed", inp.task_id)
        return
    repo, sha = inp.context.channel, inp.context.reply_target or ""
    where = f"#{inp.context.thread}" if inp.context.thread else sha[:12]
    slack_context = SurfaceContext(
        surface="slack", channel=channel, user=inp.context.user, event_id=inp.context.event_id
    )
    await slack_surface.post_reply(
        PostReplyInput(
            task_id=inp.task_id,
            context=slack_context,
            text=f"CI report for {repo} {where}:\n{inp.text}",
            status=inp.status,
            step=inp.step,
        ),
        rt,
    )


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
    for target in targets:
        await _comment(rt, repo, target, body, f"{key}:{target}")
    if slack:
        await _to_slack(inp, slack, rt)


async def post_approval_request(inp: PostApprovalRequestInput, rt: Runtime) -> PostApprovalRequestResult:
    repo = _repo(inp.context)
    targets, _ = await _targets(rt, inp.context)
    if not targets:
        return PostApprovalRequestResult(message_ref=None)
    body = approval_body(inp.task_id, inp.agent_name, inp.request)
    key = f"{inp.task_id}:approval:{inp.request.request_id}"
    ref = await _comment(rt, repo, targets[0], body, key)
    return PostApprovalRequestResult(message_ref=ref)


async def resolve_approval_request(inp: ResolveApprovalRequestInput, rt: Runtime) -> None:
    if not inp.message_ref:
        return
    repo = _repo(inp.context)
    key = f"{inp.task_id}:approval:{inp.request.request_id}"
    try:
        await edit_comment(rt, repo, inp.message_ref, with_marker(resolved_body(inp.task_id, inp), key))
    except ToolError as exc:  # the comment was deleted meanwhile: nothing left to update
        log.info("approval comment for %s not updated: %s", inp.task_id, exc)
