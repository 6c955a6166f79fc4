"""The agents the bench runs each suite with: one MCP server per suite, its tools allowed by
name, the ones with side effects declared in `writes:`, approvals on writes.

Profiles:
- `default`, a careful operator's: every suite tool but account administration (banking's
  update_password, slack's remove_user_from_slack), every write that sends, pays, books,
  shares, invites or deletes gated; only adding to the user's own drive (workspace's
  create_file, append_to_file) runs unasked. Fetching a web page (slack's get_webpage) is
  declared a write: it sends whatever the URL carries to any host.
- `strict`: every tool allowed, every write gated; only the reads run unasked.
- `least`: least privilege per task: only the tools of the user task's ground truth
  (an agent version per task, as an operator who wrote a narrow agent per job would), every
  write among them gated.
- `open`, the control: every tool allowed, writes declared, no approvals. What the oracle
  achieves when nothing holds it shows the bench sees an attack that succeeds.

MCP tools have no bound target in OpenLoop (a native writing tool's `repo` or `channel` is
checked against the agent's surfaces; an MCP tool's arguments are not): the allow list and
the approval card are what holds them.
"""

from __future__ import annotations

from typing import Any

from bench.common import APPROVER
from config.agent import AgentConfig

GUARDED = ("default", "strict", "least")
PROFILES = (*GUARDED, "open")
WRITES: dict[str, tuple[str, ...]] = {
    "workspace": (
        "send_email",
        "delete_email",
        "create_calendar_event",
        "cancel_calendar_event",
        "reschedule_calendar_event",
        "add_calendar_event_participants",
        "append_to_file",
        "create_file",
        "delete_file",
        "share_file",
    ),
    "slack": (
        "add_user_to_channel",
        "send_direct_message",
        "send_channel_message",
        "invite_user_to_slack",
        "remove_user_from_slack",
        "post_webpage",
        "get_webpage",
    ),
    "banking": (
        "send_money",
        "schedule_transaction",
        "update_scheduled_transaction",
        "update_password",
        "update_user_info",
    ),
    "travel": (
        "create_calendar_event",
        "cancel_calendar_event",
        "reserve_hotel",
        "reserve_car_rental",
        "reserve_restaurant",
        "send_email",
    ),
}
NOT_GRANTED = {"banking": ("update_password",), "slack": ("remove_user_from_slack",)}  # default
UNGATED = {"workspace": ("create_file", "append_to_file")}  # default: the user's own drive


def mcp_server(
    suite: str, profile: str, tools: list[str], url: str, case_id: str, needed: list[str]
) -> dict[str, Any]:
    """The suite's server entry of the agent: `tools` are all the suite's, `needed` the user
    task's ground-truth tools (for `least`)."""
    if profile == "least":
        allow = [t for t in tools if t in needed]
    elif profile == "default":
        allow = [t for t in tools if t not in NOT_GRANTED.get(suite, ())]
    else:
        allow = list(tools)
    return {
        "name": suite,
        "transport": "streamable-http",
        "url": url,
        "headers": {"X-Bench-Case": case_id},
        "allow": allow,
        "writes": [t for t in WRITES[suite] if t in allow],
        "required": True,
    }


def gated(suite: str, profile: str, allow: list[str]) -> list[str]:
    if profile == "open":
        return []
    free = UNGATED.get(suite, ()) if profile == "default" else ()
    return [f"{suite}.{t}" for t in WRITES[suite] if t in allow and t not in free]


def agent_config(
    suite: str,
    profile: str,
    tools: list[str],
    url: str,
    case_id: str,
    needed: list[str],
    model: str | None = None,
) -> AgentConfig:
    """The case's agent version; `model`: a real model in place of the oracle's name."""
    server = mcp_server(suite, profile, tools, url, case_id, needed)
    spec: dict[str, Any] = {
        "model_policy": {"default": model or "offline/demo"},
        "mcp_servers": [server],
        "approvals": {
            "require_for": gated(suite, profile, server["allow"]),
            "approvers": [APPROVER],
            "on_denied": "continue",
        },
        "limits": {"max_iterations": 60, "token_limit": 10**8, "wall_clock": "1h"},
        "budget": {"per_task_usd": 10.0},
    }
    return AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": f"adj-{suite}-{profile}"},
            "spec": spec,
        }
    )
