"""The Slack app manifest the agents need: exactly the bot scopes and events their config uses.

`openloop slack manifest` prints it; paste it at api.slack.com/apps → *Create New App* →
*From a manifest*. Every scope is here for a reason the agents' config gives:

- always, for an agent in Slack: `app_mentions:read` (mentions start tasks), `chat:write`
  (replies, the progress message, approval cards, ephemeral answers), `reactions:write`
  (the progress reaction), `channels:history` and `groups:history` (reading the thread and
  replies in it: the `message.channels` / `message.groups` events), `users:read` (names in a
  thread, `@handles`), `channels:read` (`#channel` names at apply, the `channel_rename` event
  a binding follows)
- `usergroups:read` when a user group is named (trigger groups, or approvers that are groups
  or `@handles` that may be groups)
- `files:write` when **Show diff** is possible (an agent may open a draft pull request)
- `assistant:write`, `im:history` and the assistant thread events when an agent answers in
  assistant threads (`surfaces.slack.assistant`)
- `app_home_opened` and the Home tab when App Home is on (`surfaces.slack.app_home`)

Socket Mode needs no request URLs (`settings.socket_mode_enabled`); the Events API needs the
surfaces' public base URL for `/slack/events` and `/slack/interactivity`.
"""

from __future__ import annotations

from dataclasses import dataclass

from activities.slack.names import GROUP_ID
from config.agent import AgentConfig

BASE_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "channels:read",
    "chat:write",
    "groups:history",
    "reactions:write",
    "users:read",
)
BASE_EVENTS = ("app_mention", "channel_rename", "message.channels", "message.groups")
ASSISTANT_EVENTS = ("assistant_thread_context_changed", "assistant_thread_started", "message.im")
SHOW_DIFF_TOOL = "github.create_pull_request"


@dataclass(frozen=True)
class Needs:
    scopes: list[str]
    events: list[str]
    app_home: bool
    assistant: bool


def needs(agents: list[AgentConfig]) -> Needs:
    """The scopes and bot events these agents use in Slack (none without a Slack agent)."""
    in_slack = [a for a in agents if a.spec.surfaces.slack is not None]
    scopes: set[str] = set(BASE_SCOPES) if in_slack else set()
    events: set[str] = set(BASE_EVENTS) if in_slack else set()
    app_home = assistant = False
    for agent in in_slack:
        slack = agent.spec.surfaces.slack
        assert slack is not None
        approvers = agent.spec.approvals.approvers
        if slack.triggers.usergroups or any(GROUP_ID.match(a) or a.startswith("@") for a in approvers):
            scopes.add("usergroups:read")
        if agent.spec.tool(SHOW_DIFF_TOOL) is not None:
            scopes.add("files:write")
        if slack.assistant:
            assistant = True
            scopes |= {"assistant:write", "im:history"}
            events |= set(ASSISTANT_EVENTS)
        if slack.app_home:
            app_home = True
            events.add("app_home_opened")
    return Needs(sorted(scopes), sorted(events), app_home, assistant)


def manifest(
    agents: list[AgentConfig], *, name: str = "OpenLoop", socket_mode: bool, base_url: str | None
) -> dict[str, object]:
    """Slack's app manifest (schema of api.slack.com/reference/manifests) for these agents."""
    need = needs(agents)
    features: dict[str, object] = {"bot_user": {"display_name": name, "always_online": True}}
    if need.app_home:
        features["app_home"] = {
            "home_tab_enabled": True,
            "messages_tab_enabled": need.assistant,
            "messages_tab_read_only_enabled": False,
        }
    if need.assistant:
        features["assistant_view"] = {"assistant_description": f"{name}: your team's agents"}
    events: dict[str, object] = {"bot_events": need.events}
    interactivity: dict[str, object] = {"is_enabled": True}
    if not socket_mode:
        root = (base_url or "https://openloop.example.com").rstrip("/")
        events = {"request_url": f"{root}/slack/events", **events}
        interactivity["request_url"] = f"{root}/slack/interactivity"
    return {
        "display_information": {"name": name, "description": "Team AI agents on Temporal"},
        "features": features,
        "oauth_config": {"scopes": {"bot": need.scopes}},
        "settings": {
            "event_subscriptions": events,
            "interactivity": interactivity,
            "org_deploy_enabled": False,
            "socket_mode_enabled": socket_mode,
            "token_rotation_enabled": False,
        },
    }
