"""A coding task whose agent names `spec.coding.sandbox.env_file` and `.repos`, end to end on
real Temporal, Postgres, bubblewrap and git: its commands read the extra repository and the
file's keys, the model reads the values masked, the task's history holds none of them, and the
pull request carries the fix alone."""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any

from temporalio.client import Client

from tests.fakes.model_api import FakeModelAPI, tool_call
from tests.helpers import approve_when_pending
from tests.integration.coding_env import FIX, cloned, coding_world, result_of
from tests.integration.loop_env import PYTEST
from workflows.types import TaskStatus

SECRET = "sk-coder-env-file-value-0123456789"


def _decoded(node: Any) -> list[str]:
    """Every string in a history's JSON, and every payload's data decoded."""
    if isinstance(node, dict):
        return [text for key, value in node.items() for text in _decoded(value) + _payload(key, value)]
    if isinstance(node, list):
        return [text for value in node for text in _decoded(value)]
    return [node] if isinstance(node, str) else []


def _payload(key: str, value: Any) -> list[str]:
    if key != "data" or not isinstance(value, str):
        return []
    try:
        return [base64.b64decode(value, validate=True).decode(errors="replace")]
    except (binascii.Error, ValueError):
        return []


async def test_a_coding_task_reads_its_extra_repository_and_env_file_and_proposes_neither(
    client: Client, pg_url: str, tmp_path: Path, api: FakeModelAPI
) -> None:
    env_file = tmp_path / "coder.env"
    env_file.write_text(f"API_TOKEN={SECRET}\n")
    shared = tmp_path / "shared-files"
    (shared / "schemas").mkdir(parents=True)
    (shared / "schemas" / "order.json").write_text('{"type": "object"}\n')
    async with coding_world(client, pg_url, tmp_path) as world:
        world.git.make_repo("acme/shared", shared)
        command = "cat vendor/shared/schemas/order.json; echo token=$API_TOKEN"
        api.answer_tool_calls([tool_call("c1", "code__open_workspace", {"repo": world.repo})])
        api.answer_tool_calls([tool_call("c2", "code__run", {"command": command})])
        api.answer_tool_calls([tool_call("c3", "code__edit_file", FIX)])
        api.answer_tool_calls([tool_call("c4", "code__run_tests", {})])
        api.answer_tool_calls(
            [
                tool_call(
                    "c5", "github__create_pull_request", {"title": "Fix calc.mean", "body": "Divide by n."}
                )
            ]
        )
        api.answer("Proposed the fix.")
        sandbox = {"env_file": str(env_file), "repos": [{"github": "acme/shared", "into": "vendor/shared"}]}
        agent = await world.agent(coding={"verify": PYTEST, "limits": {"memory": "1Gi"}, "sandbox": sandbox})
        handle = await world.start(agent, f"test_mean fails on main in {world.repo}; fix it")
        pending = await approve_when_pending(handle)
        result = await result_of(handle)
        checkout = cloned(world, f"openloop/{handle.id}", tmp_path / "pushed")
        history = json.loads((await handle.fetch_history()).to_json())

    assert result.status == TaskStatus.SUCCESS, result
    assert pending.arguments["diff"] == "1 file(s) changed, +1 −1"
    assert not (checkout / "vendor").exists()  # the pull request carries the fix alone
    told = "\n".join(
        str(m.get("content") or "") for m in api.requests[2].body["messages"] if m["role"] == "tool"
    )
    assert '{"type": "object"}' in told and "token=***" in told
    texts = _decoded(history)
    assert any("token=***" in text for text in texts)  # the scan reads the payloads
    assert not [text for text in texts if SECRET in text]
    assert not [request for request in api.requests if SECRET in json.dumps(request.body)]
