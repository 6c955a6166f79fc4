"""`openloop loops doctor`'s checks against the real database: commands found or not, and an
agent fixer that is applied and may read, change and test code — or why not."""

from __future__ import annotations

import uuid
from pathlib import Path

from activities.store.agents import apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from surfaces.cli.loop_doctor import doctor
from tests.integration.coding_env import CODE_TOOLS
from tests.integration.loop_env import DEMO
from workflows.loop_types import LoopSpec, Mission, RepoSource, Sandbox, Step


def _spec(fix: str, fixer: str | None = None) -> LoopSpec:
    return LoopSpec(
        name="doc",
        mission=Mission(objective="tests pass"),
        repo=RepoSource(path=str(DEMO)),
        commands={Step.FIX: fix, Step.VERIFY: "python -m pytest -q"},
        sandbox=Sandbox(provider="none"),
        fixer_agent=fixer,
    )


async def _apply(settings: Settings, tools: list[dict[str, object]]) -> str:
    name = f"fixer-{uuid.uuid4().hex[:8]}"
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": name},
            "spec": {"tools": tools},
        }
    )
    await apply_agent(await get_pool(settings.require_database_url()), config)
    return name


def _by_name(checks: list) -> dict[str, tuple[bool, str]]:  # type: ignore[type-arg]
    return {check.name: (check.ok, check.detail) for check in checks}


async def test_a_missing_fix_program_is_named(db_settings: Settings, tmp_path: Path) -> None:
    checks = _by_name(await doctor(_spec("no-such-fixer --go"), db_settings))
    assert checks["fix command"] == (False, "'no-such-fixer' is not on PATH or in the project")
    assert checks["verify command"][0] is True


async def test_an_agent_fixer_must_be_applied_and_able_to_change_code(db_settings: Settings) -> None:
    able = await _apply(db_settings, CODE_TOOLS)
    checks = _by_name(await doctor(_spec(f"agent {able}", able), db_settings))
    assert "fix command" not in checks  # `agent NAME` is not a program
    assert checks["fix agent"][0] is True, checks["fix agent"]

    reader = await _apply(db_settings, [{"name": "code.read_file", "permissions": ["code:read"]}])
    ok, detail = _by_name(await doctor(_spec(f"agent {reader}", reader), db_settings))["fix agent"]
    assert not ok and detail == f"{reader} has no code.* tool with code:write, code:run"

    ok, detail = _by_name(await doctor(_spec("agent ghost", "ghost"), db_settings))["fix agent"]
    assert not ok and "no agent 'ghost' is applied" in detail
