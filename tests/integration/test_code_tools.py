"""The coding activity on a real workspace: real git, real bubblewrap, real Postgres.

A workspace made from the demo project (whose `mean` divides by one too many) is held by
this process as a loop worker; each coding tool call goes through the activity exactly as a
task's would, and what it stores (outputs, the diff, its files whole) is read back."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.loops import workspace
from activities.loops.host import configure_host
from activities.loops.sandbox import sandbox_problem
from activities.runtime import runtime
from activities.store import loops as loop_rows
from activities.store.changes import FileChange, load_changes
from activities.tools.code_activities import run_code_tool
from activities.tools.tool_activities import execute_tool
from config.settings import Settings
from tests.integration.loop_env import DEMO, PYTEST
from workflows.code_types import CodeSetup, CodeToolInput, CodeToolResult
from workflows.errors import ErrorType
from workflows.loop_types import Limits, RepoSource, Sandbox, WorkspaceHandle
from workflows.types import MemoryScopeRef, SurfaceContext, ToolCallInput

SECRET = "ghs_never-in-the-sandbox-0123456789"
FIXED = "    return sum(values) / len(values)\n"
CONTEXT = SurfaceContext(surface="slack", channel="C0CODE", user="U1", thread="1.0")
MEMORY = MemoryScopeRef("ws", "coder", "channel", "slack:C0CODE", "offline/hash", 30)


@dataclass
class Workspace:
    handle: WorkspaceHandle
    setup: CodeSetup
    task_id: str
    beats: list[Any] = field(default_factory=list)
    calls: int = 0

    @property
    def root(self) -> Path:
        return Path(self.handle.path)

    def call(self, tool: str, **arguments: object) -> ToolCallInput:
        self.calls += 1
        return ToolCallInput.for_call(
            self.task_id, self.calls, f"call-{self.calls}", tool, arguments, CONTEXT, MEMORY
        )

    async def run(self, tool: str, **arguments: object) -> CodeToolResult:
        env = ActivityEnvironment()
        env.on_heartbeat = lambda *details: self.beats.append(details)
        request = CodeToolInput(call=self.call(tool, **arguments), workspace=self.handle, setup=self.setup)
        return await env.run(run_code_tool, request)

    async def output(self, done: CodeToolResult) -> str:
        """The whole answer the model reads: history holds a preview of a long one."""
        if done.result.output_ref is None:
            return done.result.output
        pool = await runtime().pool()
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT content FROM tool_outputs WHERE ref = %s", (done.result.output_ref,)
            )
            row = await cursor.fetchone()
        assert row is not None
        return str(row["content"])


@pytest.fixture
async def demo(db_settings: Settings, tmp_path: Path) -> AsyncIterator[Workspace]:
    # The sandbox is what these tests are about: a worker that cannot make one fails them.
    assert sandbox_problem() is None, sandbox_problem()
    host = configure_host(tmp_path / "workspaces", name=f"code-test-{uuid.uuid4().hex[:6]}")
    task_id = f"task-code-{uuid.uuid4().hex[:8]}"
    path = host.repo(task_id)
    base = await workspace.copy_local(DEMO, path)
    handle = WorkspaceHandle(
        loop_id=task_id, task_queue=host.task_queue, worker=host.name, path=str(path), base_commit=base
    )
    setup = CodeSetup(
        repo=RepoSource(path=str(DEMO)),
        verify=PYTEST,
        limits=Limits(command_timeout_s=60, stall_timeout_s=30, memory_mb=1024),
        sandbox=Sandbox(env_from=["OPENLOOP_CODE_TEST_VISIBLE"]),
    )
    yield Workspace(handle, setup, task_id)


async def test_a_failing_test_is_found_fixed_and_the_fix_stored_with_its_files(demo: Workspace) -> None:
    before = await demo.run("code.run_tests")
    assert before.result.ok and before.result.output.startswith("FAILED: ")
    assert "Failing tests (1): tests/test_calc.py::test_mean" in await demo.output(before)
    assert before.tests is not None and not before.tests.passed
    assert before.tests.failing == ["tests/test_calc.py::test_mean"]
    empty = hashlib.sha256(b"").hexdigest()
    assert before.diff is not None and (before.diff.sha256, before.diff.files_changed) == (empty, 0)
    assert before.tests.diff_sha256 == empty

    read = await demo.run("code.read_file", path="calc.py", start_line=8)
    assert read.result.ok and "    12      return sum(values) / (len(values) + 1)" in await demo.output(read)
    assert read.diff is None  # reading changes nothing, so no diff is taken

    edit = await demo.run("code.edit_file", path="calc.py", old="/ (len(values) + 1)", new="/ len(values)")
    assert edit.result.ok, edit.result.output
    assert edit.diff is not None and (edit.diff.files_changed, edit.diff.insertions, edit.diff.deletions) == (
        1,
        1,
        1,
    )

    after = await demo.run("code.run_tests")
    assert after.result.ok and after.result.output.startswith("PASSED: ")
    assert after.tests is not None and after.tests.passed and after.tests.failing == []
    assert "3 passed" in after.tests.summary
    assert after.diff == edit.diff and after.tests.diff_sha256 == edit.diff.sha256

    pool = await runtime().pool()
    changes = await load_changes(pool, edit.diff.sha256)
    assert changes is not None and [(c.path, c.mode) for c in changes] == [("calc.py", "100644")]
    assert changes[0].content == (DEMO / "calc.py").read_bytes().replace(
        b"    return sum(values) / (len(values) + 1)\n", FIXED.encode()
    )
    patch = (await loop_rows.load_diff(pool, edit.diff.sha256)) or b""
    assert b"+" + FIXED.encode() in patch

    shown = await demo.run("code.diff")
    assert shown.result.ok and shown.diff == edit.diff
    assert shown.result.output.startswith("1 file(s) changed, 1 insertion(s)(+), 1 deletion(s)(-): calc.py")
    assert "-    return sum(values) / (len(values) + 1)" in await demo.output(shown)

    stored = await loop_rows.outputs(pool, demo.task_id)
    assert [row["step"] for row in stored] == ["code.run_tests", "code.run_tests"]
    assert before.tests.output_id == stored[0]["output_id"] and b"1 failed" in bytes(stored[0]["output"])
    async with pool.connection() as conn:
        audited = await (
            await conn.execute(
                "SELECT tool, outcome FROM audit_log WHERE task_id = %s ORDER BY step", (demo.task_id,)
            )
        ).fetchall()
    assert [(row["tool"], row["outcome"]) for row in audited] == [
        ("code.run_tests", "ok"), ("code.read_file", "ok"), ("code.edit_file", "ok"),
        ("code.run_tests", "ok"), ("code.diff", "ok"),
    ]  # fmt: skip


async def test_a_command_sees_only_the_variables_the_setup_lists(
    demo: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    monkeypatch.setenv("OPENLOOP_CODE_TEST_VISIBLE", "listed-in-env-from")
    listed = await demo.run("code.run", command="env; printenv GITHUB_TOKEN; echo printenv-said=$?")
    output = await demo.output(listed)
    assert listed.result.ok and "exit code 0, passed" in output
    assert "OPENLOOP_CODE_TEST_VISIBLE=listed-in-env-from" in output  # the listed one is there
    assert f"OPENLOOP_WORKSPACE={demo.root}" in output and "printenv-said=1" in output
    assert SECRET not in output and "GITHUB_TOKEN" not in output.replace("printenv GITHUB_TOKEN", "")
    pool = await runtime().pool()
    stored = await loop_rows.outputs(pool, demo.task_id, step="code.run")
    assert SECRET.encode() not in bytes(stored[0]["output"])
    assert f"stored as output {stored[0]['output_id']}" in output


async def test_a_long_command_beats_and_its_output_is_cut_to_its_end(demo: Workspace) -> None:
    done = await demo.run("code.run", command="seq 1 20000; sleep 1.5; echo last-line; exit 3")
    output = await demo.output(done)
    assert "exit code 3, failed after" in output and output.rstrip().endswith("last-line")
    assert "Output, last 8000 of" in output and "\n1\n" not in output
    assert any(beat[0].get("tool") == "code.run" for beat in demo.beats if beat and isinstance(beat[0], dict))
    assert done.result.output_ref is not None  # the whole answer is stored, history gets a preview


async def test_every_kind_of_change_is_stored_whole(demo: Workspace) -> None:
    await demo.run("code.write_file", path="docs/notes.md", content="# Notes\n")
    done = await demo.run(
        "code.run", command="ln -s calc.py alias.py && rm conftest.py && chmod +x autofix.py"
    )
    assert done.result.ok and done.diff is not None and done.diff.files_changed == 4
    changes = await load_changes(await runtime().pool(), done.diff.sha256)
    assert changes == [
        FileChange("alias.py", "120000", b"calc.py"),
        FileChange("autofix.py", "100755", (DEMO / "autofix.py").read_bytes()),
        FileChange("conftest.py", "100644", None),
        FileChange("docs/notes.md", "100644", b"# Notes\n"),
    ]


async def test_paths_outside_the_workspace_or_in_git_are_refused_through_the_activity(
    demo: Workspace, tmp_path: Path
) -> None:
    (tmp_path / "outside.txt").write_text("keep\n")
    escape = await demo.run("code.write_file", path="../../outside.txt", content="planted\n")
    git = await demo.run("code.edit_file", path=".git/config", old="[core]", new="[core]\n\thooksPath = /tmp")
    assert (escape.result.ok, escape.result.error_kind, git.result.error_kind) == (
        False,
        "permission",
        "permission",
    )
    assert "leads outside the workspace" in escape.result.output
    assert (tmp_path / "outside.txt").read_text() == "keep\n"
    assert "hooksPath" not in (workspace.git_dir(demo.root) / "config").read_text()
    assert escape.diff is not None and escape.diff.files_changed == 0


async def test_without_a_test_command_run_tests_says_where_to_set_one(demo: Workspace) -> None:
    demo.setup = demo.setup.model_copy(update={"verify": ""})
    done = await demo.run("code.run_tests")
    assert (done.result.ok, done.result.error_kind, done.tests) == (False, "failed", None)
    assert "set spec.coding.verify in the agent's file" in done.result.output


async def test_a_workspace_this_worker_does_not_hold_is_lost(demo: Workspace) -> None:
    for handle in (
        demo.handle.model_copy(update={"worker": "another-worker"}),
        demo.handle.model_copy(update={"path": str(demo.root.parent / "gone")}),
    ):
        demo.handle = handle
        with pytest.raises(ApplicationError) as caught:
            await demo.run("code.list_files")
        assert caught.value.type == ErrorType.WORKSPACE_LOST and caught.value.non_retryable


async def test_only_coding_tools_run_on_a_workspace_and_they_run_nowhere_else(demo: Workspace) -> None:
    with pytest.raises(ApplicationError) as caught:
        await demo.run("github.comment", repo="acme/demo", number=1, body="hi")
    assert caught.value.type == ErrorType.TOOL_CONFIG_ERROR
    elsewhere = await execute_tool(demo.call("code.list_files"), runtime())
    assert not elsewhere.ok and "coding tools run only in a task that has a workspace" in elsewhere.output
