"""Dead providers on the wire: a rejected or missing key is skipped for a cool-down, a missing
key never reads as an outage, the model that answered is the one charged, and LiteLLM's
banner never reaches the worker's output."""

from __future__ import annotations

import logging
import uuid

import pytest
from temporalio.exceptions import ApplicationError

from activities.llm import health
from activities.store.agents import apply_agent
from activities.store.db import get_pool
from config.agent import AgentConfig
from config.settings import Settings
from tests.fakes.model_api import FakeModelAPI
from tests.integration.model_env import MODEL, call_input, rows, run


async def test_a_rejected_key_is_skipped_for_a_cool_down(
    api: FakeModelAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.fail(401, model="gpt-4o-mini")
    for text in ("first", "second", "third"):
        api.answer(text, model="gpt-4o")
    api.answer("the first model again", model="gpt-4o-mini")
    models = [MODEL, "openai/gpt-4o"]

    first = await run(call_input(models=models))
    second = await run(call_input(models=models))
    # The rejected model is not asked again on the next step (or task) of this worker.
    assert [r.model for r in api.requests] == ["gpt-4o-mini", "gpt-4o", "gpt-4o"]
    for answer, text in ((first, "first"), (second, "second")):
        assert answer.text == text and answer.usage.model == "openai/gpt-4o"

    # After the cool-down it is asked again.
    later = health._now() + health.COOL_DOWN_SECONDS + 1
    monkeypatch.setattr(health, "_now", lambda: later)
    third = await run(call_input(models=models))
    assert api.requests[-1].model == "gpt-4o-mini" and third.usage.model == MODEL


async def test_a_missing_key_is_named_skipped_and_never_an_outage(
    api: FakeModelAPI, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    caplog.set_level(logging.WARNING, logger=health.__name__)
    with pytest.raises(ApplicationError) as caught:
        await run(call_input())
    err = caught.value
    assert err.type == "ModelAuthError" and err.non_retryable
    assert "no API key" in err.message and "OPENAI_API_KEY" in err.message
    assert "unavailable" not in err.message and "500" not in err.message
    assert api.requests == []

    # The fallback answers, and it is what the step is charged to; the warning is logged
    # once per cool-down, not once per step.
    inp = call_input(models=[MODEL, "offline/demo"])
    for _ in range(3):
        answered = await run(inp if _ == 0 else call_input(models=[MODEL, "offline/demo"]))
        assert answered.usage.model == "offline/demo" and answered.offline
    ledger = await rows("SELECT model FROM usage_ledger WHERE task_id = %s", inp.task_id)
    assert ledger == [{"model": "offline/demo"}]
    assert sum("no API key" in r.getMessage() for r in caplog.records) == 1


def test_litellm_reports_of_a_missing_key_are_classified_as_auth() -> None:
    from litellm.exceptions import APIConnectionError, InternalServerError

    from activities.providers import classify_error

    cases = [
        InternalServerError(
            "OpenAIException - Missing credentials. Please pass an `api_key`", "openai", "gpt-4o-mini"
        ),
        APIConnectionError("Missing Gemini API key. Set the GEMINI_API_KEY", "gemini", "gemini-pro"),
    ]
    for exc in cases:
        err = classify_error("openai/gpt-4o-mini", exc)
        assert err.type == "ModelAuthError" and err.non_retryable, exc
        assert "no API key" in err.message
    outage = classify_error("openai/gpt-4o-mini", InternalServerError("boom", "openai", "gpt-4o-mini"))
    assert outage.type == "ModelUnavailable"


async def test_litellm_never_prints_its_banner(api: FakeModelAPI, capsys: pytest.CaptureFixture[str]) -> None:
    api.fail(500)
    with pytest.raises(ApplicationError):
        await run(call_input())
    out, err = capsys.readouterr()
    assert "Give Feedback" not in out + err and "LiteLLM.Info" not in out + err
    import litellm

    assert litellm.suppress_debug_info is True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        assert logging.getLogger(name).getEffectiveLevel() >= logging.WARNING


async def test_start_up_names_the_models_without_a_key(
    db_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    name = f"keys-{uuid.uuid4().hex[:8]}"
    config = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": name},
            "spec": {
                "model_policy": {
                    "default": "anthropic/claude-sonnet-4-5",
                    "fallbacks": ["openai/gpt-4o-mini", "offline/demo"],
                }
            },
        }
    )
    pool = await get_pool(db_settings.require_database_url())
    await apply_agent(pool, config)
    lines = await health.report_missing_keys(pool)
    mine = [line for line in lines if name in line]
    assert len(mine) == 1 and "anthropic/claude-sonnet-4-5" in mine[0] and "ANTHROPIC_API_KEY" in mine[0]
    assert not any("openai/gpt-4o-mini" in line and name in line for line in lines)
    assert not any("offline/" in line for line in lines)
