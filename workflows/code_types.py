"""What a coding task is made of: the workspace it edits, its coding tools' calls and results,
the tests before and after, and the draft pull request it proposes. Pure data shared by the
agent task's workspace part, the coding activities (on the loop worker that holds the
workspace) and the pull-request activity (on an ordinary worker, where GitHub's credentials
are). Released names and fields are permanent."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from workflows.egress_blocked import BlockedTally, CommandEgress
from workflows.loop_types import DiffSnapshot, Limits, RepoSource, Sandbox, WorkspaceHandle
from workflows.tool_call_types import ApprovalRecord, ToolCallInput, ToolCallResult


class CodeActivity:
    RUN_TOOL = "openloop.code.run_tool"  # on the workspace's own queue
    OPEN_PULL_REQUEST = "openloop.github.open_pull_request"  # on the ordinary queue


# The pull-request tool: a write that always waits for a person, whatever require_for says.
CREATE_PULL_REQUEST = "github.create_pull_request"
BRANCH_PREFIX = "openloop/"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CodeSetup(_Frozen):
    """Where a coding task's workspace comes from and how its commands run."""

    repo: RepoSource
    verify: str = ""  # the project's test command: code.run_tests runs it ("" = none configured)
    limits: Limits = Limits()
    sandbox: Sandbox = Sandbox()


class TestRun(_Frozen):
    """One run of the verify command."""

    passed: bool
    failing: list[str] | None = None  # test ids; None: the output named none
    summary: str = ""  # the last error, or how many passed
    ran: int | None = None  # how many tests ran (not skipped); None: the output said not
    output_id: int | None = None  # the stored output
    diff_sha256: str = ""  # the workspace's diff it ran against


class CodeToolInput(_Frozen):
    """One coding tool call, sent to the worker that holds the workspace."""

    call: ToolCallInput
    workspace: WorkspaceHandle
    setup: CodeSetup


class CodeToolResult(_Frozen):
    result: ToolCallResult
    diff: DiffSnapshot | None = None  # the workspace's diff after a tool that may change files
    tests: TestRun | None = None  # what code.run_tests found
    egress: CommandEgress | None = None  # code.run / run_tests with a network allowlist: what it saw


class PullRequestInput(_Frozen):
    """Open the approved diff as a draft pull request: branch, commit, pull request, each
    get-or-create, so a retried attempt makes one of each."""

    task_id: str
    repo: str  # owner/name
    base: str  # the branch the workspace was cloned from
    base_commit: str
    diff_sha256: str  # the approved diff, stored with its files (activities.store.changes)
    title: str
    body: str
    approval: ApprovalRecord
    agent: str

    @property
    def branch(self) -> str:
        # Task ids may hold characters git refuses in a branch name (`:` from a CLI task).
        return BRANCH_PREFIX + re.sub(r"[^A-Za-z0-9._-]+", "-", self.task_id).strip("-.")


class PullRequestResult(_Frozen):
    url: str
    number: int
    branch: str
    commit: str


class WorkspaceState(_Frozen):
    """A coding task's workspace as the task knows it; carried across continue-as-new."""

    handle: WorkspaceHandle
    setup: CodeSetup
    lent: bool = False  # held by a repair loop that lent it to this fix round: never rebuilt here
    diff: DiffSnapshot | None = None  # after the last tool that could change files
    tests_before: TestRun | None = None
    tests_after: TestRun | None = None  # the latest run
    pull_requests: list[str] = []  # links of the draft pull requests opened
    blocked: BlockedTally | None = None  # what the network allowlist refused its commands
