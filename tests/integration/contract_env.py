"""The model boundary's contract, set up: each provider wire format the fake model server
speaks (OpenAI Chat Completions, Anthropic Messages, Ollama's chat) as the model a real
LiteLLM route reaches it by, and an agent granted every kind of tool a task may offer —
native, two MCP servers (stdio and streamable HTTP), skills, delegation with a profile, a
teammate, a repair loop, and the coding tools with a pull request — in the coding world
(real worker, loop worker with bubblewrap, git over smart HTTP, fake GitHub)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activities.providers import API_BASE_ENV
from activities.store.agents import StoredAgent, apply_agent
from activities.store.db import get_pool
from activities.store.skills import apply_skill
from bench.chaos_plans import LOOP, loop_file
from config.agent import AgentConfig
from config.skills import load_skill
from tests.fakes.model_api import FakeModelAPI
from tests.integration.coding_env import CODE_TOOLS, CodingWorld
from tests.integration.loop_env import PYTEST
from tests.integration.mcp_env import servers


@dataclass(frozen=True)
class Wire:
    """One provider wire format: the model LiteLLM routes to it, and where it is told to go."""

    name: str
    model: str
    priced: bool  # LiteLLM's cost map prices the model

    def environment(self, api: FakeModelAPI) -> dict[str, str]:
        if self.name == "openai":
            return {API_BASE_ENV: api.base_url, "OPENAI_API_KEY": "sk-contract-openai"}
        if self.name == "anthropic":
            return {"ANTHROPIC_API_BASE": api.root_url, "ANTHROPIC_API_KEY": "sk-ant-contract"}
        return {"OLLAMA_API_BASE": api.root_url}


WIRES = [
    Wire("openai", "openai/gpt-4o-mini", priced=True),
    Wire("anthropic", "anthropic/claude-haiku-4-5", priced=True),
    Wire("ollama", "ollama_chat/llama3.1", priced=False),
]

SKILL_BODY = "Step one: read the failing test. Step two: change as little as you can."
SKILL_NOTES = "Notes: calc.mean divides by the count."


def skill_folder(root: Path, name: str) -> Path:
    where = root / name
    where.mkdir(parents=True, exist_ok=True)
    front = f'---\nname: {name}\ndescription: "How to fix a small bug"\n---\n'
    (where / "SKILL.md").write_text(front + SKILL_BODY + "\n")
    (where / "notes.md").write_text(SKILL_NOTES)
    return where


@dataclass
class Team:
    agent: StoredAgent  # granted every kind of tool
    teammate: str
    skill: str
    mcp_state: Path


async def contract_team(world: CodingWorld, wire: Wire, tmp: Path, mcp_url: str) -> Team:
    """The agent under test and its teammate on `wire`'s model, its skill applied, the loop
    file it may start written."""
    suffix = uuid.uuid4().hex[:6]
    pool = await get_pool(world.settings.require_database_url())
    skill = f"bugfix-{suffix}"
    await apply_skill(pool, load_skill(skill_folder(tmp / "skills", skill)))
    teammate = await _applied(pool, f"reviewer-{suffix}", wire, tools=[])
    world.settings.loops_dir.mkdir(parents=True, exist_ok=True)
    (world.settings.loops_dir / f"{LOOP}.yaml").write_text(loop_file(world.repo))
    state = tmp / "mcp"
    state.mkdir(exist_ok=True)
    mcp = servers(state, mcp_url)
    mcp[0]["allow"], mcp[1]["allow"] = ["read_note", "create_note"], ["whoami"]
    tools = [
        {"name": "memory.save", "permissions": ["memory:write"]},
        {"name": "memory.search", "permissions": ["memory:read"]},
        {"name": "loop.start", "permissions": ["loops:run"], "limit_to": [LOOP]},
        {"name": "agent.delegate", "permissions": ["agents:delegate"]},
        {"name": "agent.ask_teammate", "permissions": ["agents:ask"]},
        *CODE_TOOLS,
    ]
    agent = await _applied(
        pool,
        f"contract-{suffix}",
        wire,
        tools=tools,
        surfaces={"github": {"repos": [world.repo]}},
        mcp_servers=mcp,
        skills=[skill],
        team=[teammate.config.name],
        approvals={"approvers": ["cli:local"]},
        coding={"verify": PYTEST, "limits": {"command_timeout": "2m", "memory": "1Gi"}},
        limits={"max_iterations": 30},
    )
    return Team(agent, teammate.config.name, skill, state)


async def _applied(pool: Any, name: str, wire: Wire, **spec: Any) -> StoredAgent:
    budget = {} if wire.priced else {"budget": {"on_exceeded": "warn"}}
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": name},
            "spec": {"model_policy": {"default": wire.model, "max_output_tokens": 256}, **budget, **spec},
        }
    )
    stored, _ = await apply_agent(pool, config)
    return stored
