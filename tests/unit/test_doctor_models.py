"""`openloop doctor`'s model check: a missing key fails the check only when an agent is left
with no model that answers; an agent whose fallback answers without a key still runs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from activities.store.agents import StoredAgent
from config.agent import AgentConfig
from surfaces.cli.doctor import model_check

PRICED = "anthropic/claude-3-5-haiku-20241022"


def stored(name: str, policy: dict[str, object]) -> StoredAgent:
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": name},
            "spec": {"model_policy": policy},
        }
    )
    return StoredAgent(config=config, version=1, applied_at=datetime.now(UTC), spec_sha256="0" * 64)


def test_an_agent_with_no_answering_model_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    check = model_check([stored("alone", {"default": PRICED})])
    assert not check.ok
    assert f"{PRICED} (agent alone): set ANTHROPIC_API_KEY" in check.detail
    assert "no model answers for alone" in check.detail


def test_an_offline_fallback_keeps_the_agent_running(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    check = model_check([stored("helped", {"default": PRICED, "fallbacks": ["offline/demo"]})])
    assert check.ok
    assert "set ANTHROPIC_API_KEY" in check.detail and "answers through a fallback" in check.detail


def test_every_key_present_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    check = model_check([stored("keyed", {"default": PRICED})])
    assert check.ok and "each with its key" in check.detail
