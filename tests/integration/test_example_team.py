"""The shipped team: `openloop up` applies security-reviewer with the other example agents,
dev-platform names it in `spec.team`, and asking it starts a task of security-reviewer's own
config (its model, tools, memory scope, budget and its own approvers), found in the
caller's workspace. A fresh database, as `up` sees on its first run."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from temporalio.testing import ActivityEnvironment

from activities import runtime as activity_runtime
from activities.store.db import apply_migrations
from activities.team_activities import teammate_input
from config.loader import EXAMPLES_DIR, example_agent
from config.settings import Settings
from workers.up import apply_examples_on_first_run
from workflows.delegate_tool import TeammateLookup


@pytest.fixture
async def fresh_database(pg_url: str) -> AsyncIterator[str]:
    name = f"team_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
    url = make_conninfo(pg_url, dbname=name)
    apply_migrations(url)
    activity_runtime.configure(Settings(database_url=url))
    yield url


async def test_up_applies_the_security_reviewer_that_dev_platform_consults(fresh_database: str) -> None:
    applied = await apply_examples_on_first_run(fresh_database)
    shipped = sorted(path.stem for path in EXAMPLES_DIR.glob("*.yaml"))
    assert len(applied) == len(shipped) and "security-reviewer" in applied

    caller = example_agent("dev-platform")
    assert caller.spec.team == ["security-reviewer"] and caller.spec.tool("agent.ask_teammate") is not None
    found = await ActivityEnvironment().run(
        teammate_input, TeammateLookup("security-reviewer", caller.workspace)
    )
    reviewer = found.agent
    assert reviewer.name == "security-reviewer" and reviewer.workspace == caller.workspace
    assert reviewer.spec.approvals.approvers == ["U04SECLEAD", "cli:security"]  # not the caller's
    assert not set(reviewer.spec.approvals.approvers) & set(caller.spec.approvals.approvers)
    assert reviewer.spec.model_policy.default == "offline/demo"  # answers with no keys
    assert reviewer.spec.memory.scope.value == "agent"
    assert reviewer.spec.budget.per_task_usd == pytest.approx(0.20)
    assert {spec.name for spec in found.tools} == {
        "memory.search",
        "memory.save",
        "github.get_issue",
        "github.search_issues",
    }
