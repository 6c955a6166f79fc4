"""Fixtures of the reliability suite (the shared ones are in tests/conftest.py).

The worker parent (`forker`) takes seconds to warm up, so when the collected tests need it,
it is started right after collection and warms up while the first tests run.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.fakes.model_api import FakeModelAPI
from tests.reliability.harness import FAKE_OPENAI_KEY, WorkerForker

_early: list[tuple[WorkerForker, Path]] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if any("forker" in getattr(item, "fixturenames", ()) for item in items):
        where = Path(tempfile.mkdtemp(prefix="rel-workers-"))
        _early.append((WorkerForker(where), where))


@pytest.fixture(scope="session")
async def forker() -> AsyncIterator[WorkerForker]:
    """One warm parent for every worker process the suite kills or stops."""
    parent, where = _early.pop() if _early else (WorkerForker(Path(tempfile.mkdtemp())), None)
    try:
        yield await parent.warm()
    finally:
        parent.close()
        if where is not None:
            shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelAPI]:
    """The fake provider, with LiteLLM pointed at it and a fake key in the environment."""
    fake = FakeModelAPI().start()
    monkeypatch.setenv("OPENLOOP_MODEL_API_BASE", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    yield fake
    fake.stop()
