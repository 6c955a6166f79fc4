"""What a surface is, once, and the surfaces this release serves.

A surface is where people reach an agent. Every surface fills in the same points, each in a
module of its own package, and this table says where they are:

- **binding** — `spec.surfaces.<name>` (`config.surfaces`): the channels or repositories an agent
  is bound to, and who may start it there. A task's `SurfaceContext` names the surface and the
  channel, so the memory scope key (`<name>:<channel>`) and the per-channel budget follow;
- **inbox** — the HTTP endpoints (`register(app)`): the signature check, deduplication of
  retried deliveries, the ack; a surface that holds a connection (Slack's Socket Mode, Discord's
  Gateway) also adds a background runner there;
- **dispatch** — how an event becomes a task (`surfaces.tasks.start_task`, the task id derived
  from the delivery so a redelivery finds the task it started), a thread message steers the
  running task under the same trigger rule, and a click becomes the one approval update
  (`surfaces.decisions.decide`);
- **poster** — the activity side (`task_started` for the first sign and status,
  `post_reply`, `post_approval_request`, `resolve_approval_request`), each idempotent;
- **approvers** — the entries of `approvals.approvers` it resolves to the ids its clicks carry
  (a Slack user group, a Discord role);
- **credentials** — the environment it needs, checked by `openloop doctor`, and its setup.

Pure data: the modules are named, not imported, so config stays free of I/O libraries.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SurfaceKind:
    name: str  # SurfaceContext.surface, the spec.surfaces key, the memory scope key's prefix
    binds: str  # what `spec.surfaces.<name>` binds an agent to
    inbox: str | None  # surfaces module with `register(app)`
    poster: str | None  # activities module with the four surface activities' bodies
    credentials: tuple[str, ...]  # environment variables it reads (doctor names the missing)
    setup: str  # how to set it up, as `openloop doctor` says it
    approver_prefix: str = ""  # how its ids appear among approvers ("" = bare Slack user ids)


SLACK = SurfaceKind(
    name="slack",
    binds="channels",
    inbox="surfaces.slack.events",
    poster="activities.slack.surface",
    credentials=("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"),
    setup="openloop slack manifest (create the app from it), then set the tokens",
)
GITHUB = SurfaceKind(
    name="github",
    binds="repos",
    inbox="surfaces.github.webhooks",
    poster="activities.github.surface",
    credentials=("GITHUB_TOKEN", "GITHUB_WEBHOOK_SECRET"),
    setup="a token (or GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY) and a webhook to /github/webhooks",
)
DISCORD = SurfaceKind(
    name="discord",
    binds="channels",
    inbox="surfaces.discord.interactions",
    poster="activities.discord.surface",
    credentials=("DISCORD_BOT_TOKEN", "DISCORD_PUBLIC_KEY", "DISCORD_APPLICATION_ID"),
    setup="openloop discord setup (the invite link, the slash command, the interactions URL)",
    approver_prefix="discord:",
)
LINEAR = SurfaceKind(
    name="linear",
    binds="teams",
    inbox="surfaces.linear.webhooks",
    poster="activities.linear.surface",
    # LINEAR_ACCESS_TOKEN (the app's actor=app OAuth token) or LINEAR_API_KEY, and the secret
    credentials=("LINEAR_ACCESS_TOKEN", "LINEAR_API_KEY", "LINEAR_WEBHOOK_SECRET"),
    setup="a Linear OAuth app installed with actor=app (agent session events on, webhook to "
    "/linear/webhooks), then set LINEAR_ACCESS_TOKEN (or LINEAR_API_KEY) and LINEAR_WEBHOOK_SECRET",
    approver_prefix="linear:",
)
# Zoom brings meetings, not conversations: a transcript becomes a task whose answer is posted
# by its `post_to` surface (Slack or Discord), so it has no poster and no approvers of its own.
ZOOM = SurfaceKind(
    name="zoom",
    binds="meetings",
    inbox="surfaces.zoom.webhooks",
    poster=None,
    credentials=("ZOOM_WEBHOOK_SECRET_TOKEN",),
    setup="a Zoom Marketplace app (webhook only) subscribed to recording.transcript_completed at "
    "/zoom/webhooks; its secret token in ZOOM_WEBHOOK_SECRET_TOKEN",
)

# Surfaces a task can come from and answer on (the CLI and the eval runner need no push).
SURFACE_KINDS: dict[str, SurfaceKind] = {kind.name: kind for kind in (SLACK, GITHUB, DISCORD, LINEAR, ZOOM)}
NO_PUSH = ("cli", "eval")
SERVED = (*SURFACE_KINDS, "cli")
NOT_YET_SERVED: tuple[str, ...] = ()
