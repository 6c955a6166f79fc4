"""A coding task's workspace, as the agent task reaches it: opened on whichever loop worker
takes it, every `code.*` call on the queue of the worker that holds it, the tests before and
after, and the draft pull request proposed from its diff.

A part of `workflows.agent_task`, composed, not inherited. Every call that may change files
returns the workspace's diff, stored by the worker: when that worker is lost, the workspace is
rebuilt elsewhere from it (a workspace lent by a repair loop is the loop's to rebuild). The
pull request commits the stored diff a person approved, on an ordinary worker where GitHub's
credentials are; the sandbox never sees them. Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows import code_text
    from workflows.activity_options import TOOL_OPTIONS
    from workflows.code_types import (
        CodeActivity,
        CodeToolInput,
        CodeToolResult,
        PullRequestInput,
        PullRequestResult,
        WorkspaceState,
    )
    from workflows.egress_blocked import BlockedTally
    from workflows.loop_types import RepoSource, WorkerTimeouts
    from workflows.setup_types import setup_line
    from workflows.types import MemoryScopeRef, TaskInput, TaskStatus, ToolCallInput, ToolCallResult

from workflows import loop_workspace
from workflows.loop_workspace import WorkspaceLost, why
from workflows.task_record import TaskRecord, TaskStop

CODE_TASK_KIND = "code"  # a task holding a workspace asks the agent's coding model
_COMMANDS = ("code.run", "code.run_tests")
_QUICK_CALL = timedelta(minutes=2)
_COMMAND_GRACE = timedelta(seconds=60)
_MAX_REBUILDS = 3
_PREVIEW_CHARS = 1500


def _failed(message: str, kind: str = "failed") -> ToolCallResult:
    return ToolCallResult(ok=False, output=f"Error ({kind}): {message}", error_kind=kind)


class TaskWorkspace:
    def __init__(
        self, inp: TaskInput, record: TaskRecord, memory: MemoryScopeRef, state: WorkspaceState | None
    ) -> None:
        self.inp = inp
        self.record = record
        self.memory = memory
        self.state = state if state is not None else inp.workspace
        self.timeouts = WorkerTimeouts()
        self.rebuilds = 0
        self.calls = 0  # the task's own calls (tests before/after, diffs), for their keys

    # Opening -------------------------------------------------------------------------------

    async def open(self, github: str, base: str) -> ToolCallResult:
        """`code.open_workspace`: clone a bound repository (the tool runner checked the binding)."""
        if self.state is not None:
            return _failed(f"a workspace of {self._repo_name()} is already open; use the code.* tools")
        repo = RepoSource(github=github, base=base)
        setup = self.inp.agent.spec.coding.setup(repo)
        try:
            handle = await loop_workspace.take(
                self.inp.task_id, repo, None, self.inp.loop_queue, self.timeouts, setup.sandbox.repos,
                setup.sandbox, setup.limits,
            )  # fmt: skip
        except ActivityError as err:
            return _failed(f"could not open a workspace of {repo.github} at {repo.base}: {why(err)}")
        self.state = WorkspaceState(handle=handle, setup=setup)
        self.inp.task_kind = CODE_TASK_KIND  # from here on, the coding model answers
        prepared = f"; {setup_line(handle.setup)}" if handle.setup else ""
        self.record.decide(f"opened a workspace of {repo.github} at {repo.base} on {handle.worker}{prepared}")
        if setup.verify:
            await self._own_call("code.run_tests")
        tests = code_text.describe_tests(self.state.tests_after, bool(setup.verify))
        self.state = self.state.model_copy(update={"tests_before": self.state.tests_after})
        return ToolCallResult(
            ok=True,
            output=(
                f"Workspace open: {repo.github} at {repo.base} (commit {handle.base_commit[:12]}), "
                f"{code_text.describe_sandbox(setup.sandbox)}{prepared}. Tests before any change: {tests}. "
                "Paths are relative to the repository root. When the tests pass, propose the change "
                "with github.create_pull_request."
            ),
        )

    # Coding tools --------------------------------------------------------------------------

    async def run_tool(self, call: ToolCallInput) -> ToolCallResult:
        if self.state is None:
            return _failed("no workspace is open; open one with code.open_workspace first")
        return (await self._call(call)).result

    async def _own_call(self, tool: str) -> CodeToolResult:
        """A call the task makes itself: the tests before and after, the diff it proposes."""
        self.calls += 1
        call = ToolCallInput.for_call(
            self.inp.task_id, self.record.step, f"ws{self.calls}", tool, {}, self.inp.context, self.memory
        )
        return await self._call(call)

    async def _call(self, call: ToolCallInput) -> CodeToolResult:
        assert self.state is not None
        cut: list[str] = []  # what the model hears of a call its worker's stop cut short
        done: CodeToolResult
        while True:
            state = self.state
            limit = _QUICK_CALL
            if call.tool in _COMMANDS:
                limit = timedelta(seconds=state.setup.limits.command_timeout_s) + _COMMAND_GRACE
            request = CodeToolInput(call=call, workspace=state.handle, setup=state.setup)
            try:
                done = await loop_workspace.on_workspace(
                    self.timeouts,
                    state.handle,
                    CodeActivity.RUN_TOOL,
                    request,
                    CodeToolResult,
                    limit,
                    call.tool,
                )
            except WorkspaceLost as lost:
                how = "by a worker shutdown" if lost.shutdown else "when its worker stopped answering"
                cut.append(f"({call.tool} was interrupted {how}; it ran again on a new workspace)")
                await self._rebuild(str(lost))
                continue
            except ActivityError as err:
                return CodeToolResult(result=_failed(why(err)))
            break
        changes: dict[str, object] = {}
        if done.diff is not None:
            changes["diff"] = done.diff
        if done.tests is not None:
            ran_on = done.diff.sha256 if done.diff is not None else done.tests.diff_sha256
            changes["tests_after"] = done.tests.model_copy(update={"diff_sha256": ran_on})
        if done.egress is not None and (done.egress.report.blocked or done.egress.report.dropped):
            changes["blocked"] = (state.blocked or BlockedTally()).add(done.egress, call.step)
        self.state = state.model_copy(update=changes)
        if cut:
            told = dataclasses.replace(done.result, output="\n".join([*cut, done.result.output]))
            done = done.model_copy(update={"result": told})
        return done

    async def _rebuild(self, lost: str) -> None:
        """The worker holding the workspace is gone: the same workspace again on another one,
        from the last stored diff. A loop's workspace is the loop's to rebuild."""
        assert self.state is not None
        if self.state.lent:
            raise TaskStop(TaskStatus.ERROR, f"the loop's workspace was lost ({lost})")
        self.rebuilds += 1
        if self.rebuilds > _MAX_REBUILDS:
            raise TaskStop(TaskStatus.ERROR, f"lost the workspace {self.rebuilds} times; last: {lost}")
        setup, diff = self.state.setup, self.state.diff
        handle = await loop_workspace.take(
            self.inp.task_id, setup.repo, diff, self.inp.loop_queue, self.timeouts, setup.sandbox.repos,
            setup.sandbox, setup.limits,
        )  # fmt: skip
        self.record.decide(f"the workspace's worker was lost ({lost}); rebuilt it on {handle.worker}")
        self.state = self.state.model_copy(update={"handle": handle})

    # The proposal --------------------------------------------------------------------------

    async def proposal(
        self, arguments: dict[str, object], cost_usd: float
    ) -> dict[str, object] | ToolCallResult:
        """What a person approves: the model's title and body with the repository, the diff
        (its stat, hash and start), the tests before and after and the cost so far; or why
        there is nothing to propose."""
        state = self.state
        if state is None or state.lent:
            return _failed("no workspace of yours is open; open one with code.open_workspace first")
        if not state.setup.repo.github:
            return _failed("this workspace is a local folder; a pull request needs a GitHub repository")
        shown = await self._own_call("code.diff")
        diff = shown.diff
        if diff is None or diff.files_changed == 0:
            return _failed(
                f"the workspace has no changes from {state.setup.repo.base}: there is nothing to "
                "propose, so no pull request was opened",
                "empty",
            )
        state = self.state
        assert state is not None
        if state.setup.verify and (state.tests_after is None or state.tests_after.diff_sha256 != diff.sha256):
            await self._own_call("code.run_tests")
            state = self.state
            assert state is not None
        configured = bool(state.setup.verify)
        return {
            **arguments,
            "repo": state.setup.repo.github,
            "base": state.setup.repo.base,
            "diff": code_text.describe_diff(diff),
            "diff_sha256": diff.sha256,
            "diff_preview": shown.result.output[:_PREVIEW_CHARS],
            "full_diff": f"openloop tasks diff {self.inp.task_id}",
            "tests_before": code_text.describe_tests(state.tests_before, configured),
            "tests_after": code_text.describe_tests(state.tests_after, configured, state.tests_before),
            "cost_so_far_usd": round(cost_usd, 4),
            # Only when something was: the arguments of a task that met no allowlist stay as they were.
            **({"blocked": state.blocked.lines()} if state.blocked is not None else {}),
        }

    async def still_current(self, diff_sha256: str) -> bool:
        """Whether the workspace still holds the diff a person approved."""
        shown = await self._own_call("code.diff")
        return shown.diff is not None and shown.diff.sha256 == diff_sha256

    async def open_pull_request(self, call: ToolCallInput, cost_usd: float) -> ToolCallResult:
        """The approved diff as one branch, one commit and one draft pull request."""
        state = self.state
        assert state is not None and state.diff is not None and call.approval is not None
        args = call.arguments
        body = code_text.pull_request_body(
            str(args.get("body") or ""),
            state,
            state.diff,
            self.inp.task_id,
            code_text.origin(self.inp.context, self.inp.request),
            cost_usd,
        )
        opened: PullRequestResult = await workflow.execute_activity(
            CodeActivity.OPEN_PULL_REQUEST,
            PullRequestInput(
                task_id=self.inp.task_id,
                repo=str(args["repo"]),
                base=str(args["base"]),
                base_commit=state.handle.base_commit,
                diff_sha256=str(args["diff_sha256"]),
                title=str(args["title"]),
                body=body,
                approval=call.approval,
                agent=self.inp.agent.name,
            ),
            result_type=PullRequestResult,
            **{**TOOL_OPTIONS, "summary": "open the draft pull request"},
        )
        self.state = state.model_copy(update={"pull_requests": [*state.pull_requests, opened.url]})
        return ToolCallResult(
            ok=True,
            output=(
                f"Opened draft pull request #{opened.number}: {opened.url} "
                f"(branch {opened.branch}, commit {opened.commit[:12]})"
            ),
        )

    def closing_lines(self, reply: str) -> list[str]:
        """The pull requests a reply must name, if it does not already."""
        opened = self.state.pull_requests if self.state is not None else []
        return [f"Draft pull request: {url}" for url in opened if url not in reply]

    def _repo_name(self) -> str:
        assert self.state is not None
        repo = self.state.setup.repo
        return repo.github or repo.path or "the repository"
