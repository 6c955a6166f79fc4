"""The specs of the tools the workflow runs itself stay what tasks recorded: each one's
canonical schema digest (histories and running tasks carry it, an MCP-style check compares
it), permission, writes, binding and gate, pinned to the values of release 0.1.0."""

from __future__ import annotations

import pytest

from workflows.tool_catalog import ToolSpec, WriteBound, schema_sha256
from workflows.tools import WORKFLOW_TOOLS

SPECS = {name: tool.spec for name, tool in WORKFLOW_TOOLS.items()}

# name: (sha256 of the canonical schema, permission, writes, bound_argument, bound_by, always_gated)
PINNED = {
    "agent.delegate": (
        "428f20e15c0ccf8163486ad0168115969d51898586eea8dc530f0c0bdc2f0c19",
        "agents:delegate",
        False,
        None,
        None,
        False,
    ),
    "agent.ask_teammate": (
        "19fbefc56d06c19ddd9e73e8d16d079d2dbe05d20d845776c4fe7f1e306f91ee",
        "agents:ask",
        False,
        None,
        None,
        False,
    ),
    "code.open_workspace": (
        "7eff25353bcfedca5c205683038ab236a4153911e4137b9ac688aff8f0680c28",
        "code:read",
        False,
        "repo",
        WriteBound.GITHUB_REPOS,
        False,
    ),
    "github.create_pull_request": (
        "9844046d46f621418f1e63d19ba00c45d1f80bcc382d8d79efbf42fda2bf41a0",
        "pulls:write",
        True,
        None,
        None,
        True,
    ),
    "skill.load": (
        "111e55ea97daed6ffe245c0dfd1dec139b6c6806babbea142e0ef917ce540352",
        "skills:read",
        False,
        None,
        None,
        False,
    ),
    "skill.read": (
        "c53610b398988162c64c09053c5ba0dc7f455185cae677c4c68bf4de45ff30af",
        "skills:read",
        False,
        None,
        None,
        False,
    ),
}


def test_the_workflow_runs_exactly_these_tools() -> None:
    assert sorted(SPECS) == sorted(PINNED)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_workflow_tools_spec_is_the_one_tasks_recorded(name: str) -> None:
    spec = SPECS[name]
    assert isinstance(spec, ToolSpec)
    digest, permission, writes, bound_argument, bound_by, always_gated = PINNED[name]
    assert spec.sha256 == digest == schema_sha256(spec.parameters)
    assert (spec.permission, spec.writes, spec.bound_argument, spec.bound_by, spec.always_gated) == (
        permission,
        writes,
        bound_argument,
        bound_by,
        always_gated,
    )
