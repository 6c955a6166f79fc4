"""Talking to the offline model as the workflow does, for the unit tests of its story: the
`helper` agent on C0DEV (optionally bound to a GitHub repository), a task's first messages,
and one step of the conversation, a tool call answered as the workflow would answer it."""

from __future__ import annotations

import json
from typing import Any

from activities.offline import respond
from config.agent import AgentConfig
from workflows.prompts import system_prompt
from workflows.types import SurfaceContext
from workflows.untrusted import wrap_untrusted

TOOLS = ["slack.read_thread", "memory.save", "github.create_issue"]


def agent(github: dict[str, Any] | None = None) -> AgentConfig:
    surfaces: dict[str, Any] = {"slack": {"channels": ["C0DEV"]}}
    if github is not None:
        surfaces["github"] = github
    return AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": "helper"},
            "spec": {"instructions": "Help the team, and/or keep notes.", "surfaces": surfaces},
        }
    )


def start(config: AgentConfig, request: str, surface: str = "slack") -> list[dict[str, Any]]:
    context = SurfaceContext(surface=surface, channel="C0DEV", user="U_ALICE", thread="1.0001")
    return [
        {"role": "system", "content": system_prompt(config, context)},
        {"role": "user", "content": request},
    ]


def step(messages: list[dict[str, Any]], result: str | None = None) -> tuple[str, dict[str, Any]]:
    """Ask the offline model; a tool call is answered with `result` as the workflow would."""
    reply = respond(messages, TOOLS)
    if not reply.tool_calls:
        messages.append({"role": "assistant", "content": reply.text})
        return reply.text, {}
    [call] = reply.tool_calls
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            ],
        }
    )
    tool = call.name.replace("__", ".")
    messages.append(
        {
            "role": "tool",
            "tool_call_id": call.id,
            "content": wrap_untrusted(result or "ok", f"tool:{tool}"),
        }
    )
    return tool, json.loads(call.arguments)
