"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from activities.llm import health
from activities.providers import API_BASE_ENV
from config.settings import Settings
from tests.fakes.model_api import FakeModelAPI


def serving(server: FakeModelAPI, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelAPI]:
    """Start `server` and send LiteLLM's requests to it, with a test key, until the test ends."""
    server.start()
    health.forget()  # a provider another test made cool down is asked again
    monkeypatch.setenv(API_BASE_ENV, server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    yield server
    server.stop()


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, db_settings: Settings) -> Iterator[FakeModelAPI]:
    """A local OpenAI-compatible server that LiteLLM's requests go to."""
    yield from serving(FakeModelAPI(), monkeypatch)
