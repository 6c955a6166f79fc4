"""A GitHub task's approval card, also in the agent's first Slack channel, so whoever watches
Slack can decide it there (a CI investigation's fix is often found there first).

Both messages are resolved when the request is decided: the request's message ref holds
GitHub's ref, then `|slack:` and Slack's (`issue:123|slack:C042:1700000000.000100`). A ref
without `|slack:` (stored before the card went to Slack too) is GitHub's alone. Slack is an
extra here: when it is not installed, not configured or refuses the card, the GitHub comment
still asks, and this only logs why.
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType

from temporalio.exceptions import ApplicationError

from activities.runtime import Runtime
from workflows.types import PostApprovalRequestInput, ResolveApprovalRequestInput, SurfaceContext

log = logging.getLogger(__name__)

SLACK_REF = "|slack:"


def join_refs(github: str | None, slack: str | None) -> str | None:
    if not slack:
        return github
    return f"{github or ''}{SLACK_REF}{slack}"


def split_refs(ref: str | None) -> tuple[str | None, str | None]:
    """(GitHub's ref, Slack's ref) of a stored message ref; either may be None."""
    if not ref:
        return None, None
    github, _, slack = ref.partition(SLACK_REF)
    return github or None, slack or None


def _slack_surface() -> ModuleType | None:
    try:
        return importlib.import_module("activities.slack.surface")
    except ModuleNotFoundError:
        return None


def _slack_context(context: SurfaceContext, channel: str) -> SurfaceContext:
    """The channel itself, top level: the card starts its own thread there."""
    return SurfaceContext(surface="slack", channel=channel, user=context.user, event_id=context.event_id)


async def post_card(inp: PostApprovalRequestInput, channel: str, rt: Runtime) -> str | None:
    """Post the card in `channel` (once: a retry finds it); its ref, or None when Slack cannot
    take it."""
    slack = _slack_surface()
    if slack is None:
        log.warning("approval of %s not sent to Slack: the Slack surface is not installed", inp.task_id)
        return None
    ask = PostApprovalRequestInput(
        inp.task_id, _slack_context(inp.context, channel), inp.request, inp.agent_name
    )
    try:
        posted = await slack.post_approval_request(ask, rt)
    except ApplicationError as exc:
        if not exc.non_retryable:
            raise
        log.warning("approval of %s not sent to Slack %s: %s", inp.task_id, channel, exc)
        return None
    ref: str | None = posted.message_ref
    return ref


async def resolve_card(inp: ResolveApprovalRequestInput, slack_ref: str, rt: Runtime) -> None:
    """Show the decision on the Slack card too; its buttons go away."""
    slack = _slack_surface()
    if slack is None:
        return
    channel = slack_ref.split(":", 1)[0]
    decided = ResolveApprovalRequestInput(
        inp.task_id,
        _slack_context(inp.context, channel),
        inp.request,
        slack_ref,
        inp.outcome,
        inp.decided_by,
        inp.decided_at_iso,
    )
    try:
        await slack.resolve_approval_request(decided, rt)
    except ApplicationError as exc:
        if not exc.non_retryable:
            raise
        log.warning("approval card of %s in Slack %s not updated: %s", inp.task_id, channel, exc)
