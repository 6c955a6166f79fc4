"""What a repair loop is made of: its definition, one command's request and result, a round's
report and the loop's end. Pure data shared by the loop workflow, its activities, the loop
file reader (`config.loop`) and the CLI. Released names and fields are permanent."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from workflows.egress_report import EgressReport
from workflows.setup_types import SandboxSetup, SetupReport
from workflows.task_basics import SurfaceContext

LOOP_WORKFLOW_NAME = "openloop.RepairLoop"
# Loop workers poll this queue to take a workspace; each then serves that workspace's
# commands on a queue of its own (`WorkspaceHandle.task_queue`).
LOOP_TASK_QUEUE = "openloop-loops"


class LoopActivity:
    START = "openloop.loop.start"
    ACQUIRE_WORKSPACE = "openloop.loop.acquire_workspace"
    RUN_COMMAND = "openloop.loop.run_command"
    SAVE_DIFF = "openloop.loop.save_diff"
    RECORD_ROUND = "openloop.loop.record_round"
    FINISH = "openloop.loop.finish"


class Step(StrEnum):
    PLAY = "play"
    SCAN = "scan"
    FIX = "fix"
    VERIFY = "verify"
    BASELINE = "baseline"
    IMPROVE = "improve"


class LoopStatus(StrEnum):
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    BLOCKED = "BLOCKED"
    NO_PROGRESS = "NO_PROGRESS"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"
    ERROR = "ERROR"


class Outcome(StrEnum):
    """How one command ended. Only PASSED and FAILED are the project's answer; the others
    say the command never gave one, and a round with any of them cannot complete."""

    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    STALLED = "stalled"
    OUT_OF_MEMORY = "out_of_memory"
    ABNORMAL = "abnormal"  # killed by a signal, or could not start

    @property
    def abnormal(self) -> bool:
        return self not in (Outcome.PASSED, Outcome.FAILED)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Mission(_Frozen):
    objective: str
    non_goals: list[str] = Field(default_factory=list)
    definition_of_done: str = ""


class RepoSource(_Frozen):
    """A bound GitHub repository (`github`, "owner/name") or a local git checkout (`path`)."""

    github: str | None = None
    path: str | None = None
    base: str = "main"
    agent: str | None = None  # whose GitHub credentials clone it


class Baseline(_Frozen):
    command: str
    metric_name: str
    regex: str  # its first group (or whole match) is the metric
    value: float
    direction: str = "greater_equal"  # | "less_equal"

    def met(self, measured: float | None) -> bool:
        if measured is None:
            return False
        return measured >= self.value if self.direction == "greater_equal" else measured <= self.value


class Limits(_Frozen):
    total_rounds: int = 10
    command_timeout_s: float = 600.0
    stall_timeout_s: float = 120.0
    max_consecutive_failures: int = 3
    no_progress_rounds: int = 3
    memory_mb: int = 2048
    max_processes: int = 256
    max_file_mb: int = 512
    output_kb: int = 4096  # how much of each command's output is kept
    max_duration_s: float | None = None  # no round starts after the loop has run this long
    budget_usd: float | None = None  # what an agent fixer's tasks may cost in all (None: its own budget)


class ExtraRepo(_Frozen):
    """A repository cloned read-only into the workspace when it is acquired (`sandbox.repos`)."""

    github: str | None = None  # owner/name, cloned with the worker's GitHub credentials
    path: str | None = None  # or a local git checkout (absolute)
    base: str | None = None  # the branch; None: the remote's default branch (a checkout's HEAD)
    into: str  # its folder, relative to the workspace's root


class Sandbox(_Frozen):
    provider: str = "bubblewrap"  # | "none": commands run unconfined, and every report says so
    # true: the worker's network; false: none; a list: only those hosts, through the worker's
    # egress proxies (`config.egress` says what an entry may be).
    network: bool | list[str] = False
    env_from: list[str] = Field(default_factory=list)  # worker variables the commands may see
    read_only: list[str] = Field(default_factory=list)  # extra host paths the commands may read
    # A dotenv file on the worker (absolute): its keys join the commands' variables, read at
    # command time. Only the path travels; the values never enter history.
    env_file: str | None = None
    repos: list[ExtraRepo] = Field(default_factory=list)
    setup: SandboxSetup | None = None  # run once when the workspace is taken (None: nothing)


class LoopSpec(_Frozen):
    name: str
    mission: Mission
    repo: RepoSource
    commands: dict[Step, str]  # VERIFY always; BASELINE comes from `baseline`
    baseline: Baseline | None = None
    limits: Limits = Limits()
    sandbox: Sandbox = Sandbox()
    source: str = ""  # the file it came from, for reports
    fixer_agent: str | None = None  # `fix: {agent: NAME}`: this agent fixes each round


class WorkerTimeouts(_Frozen):
    """How soon a lost loop worker is noticed: a command's activity beats every second, and a
    workspace whose worker stopped beating (or never picks its queue up) is rebuilt elsewhere."""

    heartbeat_s: float = 20.0
    pickup_s: float = 30.0
    max_reacquires: int = 3


class LoopInput(_Frozen):
    loop_id: str
    spec: LoopSpec
    started_by: str = "cli:local"
    timeouts: WorkerTimeouts = WorkerTimeouts()
    loop_queue: str = LOOP_TASK_QUEUE  # where loop workers take workspaces
    reply_to: SurfaceContext | None = None  # the thread or issue told how the loop ended


class LoopView(_Frozen):
    """What `openloop loops status` reads from a running loop (a query; no history)."""

    loop_id: str
    name: str
    status: LoopStatus
    round: int
    step: Step | None
    worker: str
    verdicts: list[RoundVerdict]
    reason: str = ""
    next_action: str = ""
    sandboxed: bool = True
    setup: str = ""  # how the workspace's setup went (`workflows.setup_types.setup_line`)


class WorkspaceHandle(_Frozen):
    """A workspace held by one loop worker; its commands go to `task_queue`."""

    loop_id: str
    task_queue: str
    worker: str
    path: str
    base_commit: str
    restored_diff: str | None = None  # the stored diff it was rebuilt from, if any
    setup: SetupReport | None = None  # how `sandbox.setup` went (None: the sandbox has none)


class AcquireRequest(_Frozen):
    loop_id: str
    repo: RepoSource
    diff_sha: str | None = None  # rebuild from this stored diff (a worker was lost)
    repos: list[ExtraRepo] = Field(default_factory=list)  # cloned read-only beside the code
    # The sandbox and limits `sandbox.setup` runs with (the defaults: no setup).
    sandbox: Sandbox = Sandbox()
    limits: Limits = Limits()


class CommandRequest(_Frozen):
    loop_id: str
    workspace: WorkspaceHandle
    round: int
    step: Step
    command: str  # still with its {placeholders}
    last_error: str = ""
    limits: Limits = Limits()
    sandbox: Sandbox = Sandbox()
    metric_regex: str | None = None
    expected_seconds: float | None = None  # from earlier rounds, for the ETA


class CommandResult(_Frozen):
    step: Step
    round: int
    command: str  # as run, placeholders filled
    outcome: Outcome
    exit_code: int | None
    duration_s: float
    output_bytes: int
    output_id: int | None  # the stored output (`openloop loops logs`)
    tail: str  # the output's last lines, bounded
    failing_tests: list[str] | None = None  # None: the output named no tests
    tests_ran: int | None = None  # how many tests ran (not skipped); None: the output said not
    metric: float | None = None
    reason: str = ""  # why an abnormal outcome happened, in words
    sandboxed: bool = True
    error_summary: str = ""  # what the next round's {last_error} gets from a failed command
    egress: EgressReport | None = None  # with a network allowlist: what was blocked and let through


class DiffRequest(_Frozen):
    loop_id: str
    workspace: WorkspaceHandle
    round: int


class DiffSnapshot(_Frozen):
    sha256: str
    files_changed: int
    insertions: int
    deletions: int


class RoundVerdict(StrEnum):
    PASSED = "passed"  # everything the loop checks passed: the loop is done
    FAILED = "failed"
    IMPROVING = "improving"  # fewer failing tests, none new
    REGRESSING = "regressing"  # a test that passed before fails now
    ABNORMAL = "abnormal"  # a command timed out, stalled, ran out of memory or crashed


class RoundReport(_Frozen):
    loop_id: str
    round: int
    commands: list[CommandResult]
    failing_tests: list[str] | None
    fixed_tests: list[str] = Field(default_factory=list)
    broken_tests: list[str] = Field(default_factory=list)
    gone_tests: list[str] = Field(default_factory=list)  # failed before, stopped failing, did not run
    metric: float | None = None
    verdict: RoundVerdict
    diff: DiffSnapshot | None = None
    worker: str = ""
    note: str = ""


class LoopResult(_Frozen):
    loop_id: str
    status: LoopStatus
    reason: str
    next_action: str
    rounds: int
    diff: DiffSnapshot | None = None
