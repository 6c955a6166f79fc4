"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from activities.providers import API_BASE_ENV
from config.settings import Settings
from tests.fakes.model_api import FakeModelAPI


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, db_settings: Settings) -> Iterator[FakeModelAPI]:
    """A local OpenAI-compatible server that LiteLLM's requests go to, with a test key."""
    server = FakeModelAPI().start()
    monkeypatch.setenv(API_BASE_ENV, server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    yield server
    server.stop()
