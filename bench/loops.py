"""Repair loops: what the loop adds to its commands, and how soon a lost workspace is back:
`python -m bench loops [--quick]` (about 5 minutes). The real RepairLoopWorkflow on the real
worker and a real loop worker, every command in bubblewrap; repositories served over git's smart
HTTP by `tests/fakes/git_http.py` (git's `http-backend`, with the token): a `github:` loop's path.

1. Overhead: a loop of exactly `rounds` rounds, play `sleep S` and verify `sleep S && test
   {round} -ge N`, against the same rendered lines run by a shell script in a loop's workspace,
   and each in the loop's own bwrap call (the sandbox's cost apart from the orchestration's);
   alternated, `repeats` times each. Where the loop's extra time goes is read from its history.
2. Re-acquire: a repository of `repo_files` incompressible files (seeded) and a stored diff of
   a few files: the acquire activity in-process (clone + stored diff), the diff's load and apply
   alone, a clone without HTTP, and one real loop whose workspace is lost in round 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shlex
import shutil
import statistics
import subprocess
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import SecretStr
from rich.console import Console
from rich.progress import Progress
from temporalio.client import WorkflowHandle
from temporalio.testing import ActivityEnvironment

from activities import runtime as activity_runtime
from activities.loops import workspace
from activities.loops.bwrap import SYSTEM_PATH, as_root, bwrap_argv, hand_over, sandbox_uid
from activities.loops.host import LoopHost
from activities.loops.loop_activities import acquire_workspace
from activities.loops.sandbox_probe import prlimit_argv, sandbox_problem
from activities.store import loops as loop_rows
from activities.store.db import get_pool
from bench.common import GITHUB_TOKEN, Stack, new_queue, running
from config.settings import Settings
from tests.fakes.git_http import FakeGitHost
from workers.loops import build_loop_workers
from workers.worker import build_worker
from workflows.loop_template import render_command, step_environment
from workflows.loop_types import (
    LOOP_WORKFLOW_NAME,
    AcquireRequest,
    Limits,
    LoopActivity,
    LoopInput,
    LoopResult,
    LoopSpec,
    LoopStatus,
    Mission,
    RepoSource,
    Step,
)

LOOP_VARIANTS = ("loop", "shell", "shell_bwrap")
ACQUIRE_VARIANTS = ("acquire_with_diff", "acquire_no_diff", "clone_without_http")
TARGET_LOOP_OVER_SHELL = 1.10
SEED = 20261124
SOURCE_FILES = 8
PROBES = 10
LOST_DEADLINE_S = 120.0
T = TypeVar("T")
SCRIPT_ENV = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}  # as `run_sandboxed` starts bwrap
CLOSING_EVENTS = {f"activity_task_{end}_event_attributes" for end in ("completed", "failed", "timed_out")}


@dataclass
class Sizes:
    rounds: int = 5
    command_s: float = 2.0
    repeats: int = 3
    repo_files: int = 50
    file_kb: int = 1024
    diff_files: int = 3

    @classmethod
    def quick(cls) -> Sizes:
        return cls(repeats=2)

    @classmethod
    def smoke(cls) -> Sizes:
        return cls(rounds=2, command_s=0.2, repeats=1, repo_files=2, file_kb=512, diff_files=2)


@dataclass
class World:
    stack: Stack
    settings: Settings
    git: FakeGitHost
    host: LoopHost

    async def start(self, spec: LoopSpec) -> WorkflowHandle[Any, LoopResult]:
        loop_id = f"bench-{spec.name}-{uuid.uuid4().hex[:8]}"
        inp = LoopInput(loop_id=loop_id, spec=spec, loop_queue=self.settings.loop_task_queue)
        return await self.stack.client.start_workflow(
            LOOP_WORKFLOW_NAME, inp, id=loop_id, task_queue=self.settings.task_queue, result_type=LoopResult
        )

    async def run(self, spec: LoopSpec) -> tuple[WorkflowHandle[Any, LoopResult], LoopResult]:
        handle = await self.start(spec)
        return handle, await handle.result()

    def repo(self, name: str, write: Callable[[Path], object]) -> Path:
        """A bare repository `name` on the git host, its files written by `write`, in one pack."""
        files = self.git.root / "_files" / name
        files.mkdir(parents=True)
        write(files)
        bare = self.git.make_repo(name, files)
        subprocess.run(["git", "-C", str(bare), "repack", "-a", "-d", "-q"], check=True)
        return bare


@contextlib.asynccontextmanager
async def loop_world(stack: Stack, root: Path) -> AsyncIterator[World]:
    """The ordinary worker and one loop worker on queues of their own, a git host for the repos."""
    git = FakeGitHost(root / "git", token=GITHUB_TOKEN).start()
    settings = stack.settings.model_copy(update={
        "task_queue": new_queue("loop"), "loop_task_queue": new_queue("loops"), "github_git_url": git.url,
        "github_token": SecretStr(GITHUB_TOKEN), "workspaces_dir": root / "workspaces",
    })  # fmt: skip
    try:
        host, loop_workers = build_loop_workers(stack.client, settings, name=f"bench-{uuid.uuid4().hex[:6]}")
        async with running([build_worker(stack.client, settings), *loop_workers]):
            yield World(stack, settings, git, host)
    finally:
        git.stop()
        activity_runtime.configure(stack.settings)  # the other benches' settings again


async def timed(work: Awaitable[T]) -> tuple[T, float]:
    started = time.perf_counter()
    return await work, time.perf_counter() - started


def summary(values: list[float], digits: int = 3) -> dict[str, Any]:
    runs = [round(v, digits) for v in values]
    return {"median": round(statistics.median(values), digits), "min": min(runs), "runs": runs}


def rotated(variants: tuple[str, ...], i: int) -> tuple[str, ...]:
    """Each repeat starts with the next variant, so none always runs first (or after another)."""
    return variants[i % len(variants) :] + variants[: i % len(variants)]


async def activity_spans(handle: WorkflowHandle[Any, Any]) -> list[tuple[str, float, float, float]]:
    """Each activity of a run: (name, scheduled, started, closed) in seconds, from its history."""
    scheduled: dict[int, tuple[str, float]] = {}
    started: dict[int, float] = {}
    spans = []
    async for event in handle.fetch_history_events():
        at, kind = event.event_time.ToMicroseconds() / 1e6, event.WhichOneof("attributes") or ""
        attributes: Any = getattr(event, kind, None)
        if kind == "activity_task_scheduled_event_attributes":
            scheduled[event.event_id] = (attributes.activity_type.name, at)
        elif kind == "activity_task_started_event_attributes":
            started[attributes.scheduled_event_id] = at
        elif kind in CLOSING_EVENTS:
            name, queued_at = scheduled[attributes.scheduled_event_id]
            spans.append((name, queued_at, started.get(attributes.scheduled_event_id, at), at))
    return spans


async def time_spent(world: World, handle: WorkflowHandle[Any, Any], wall_s: float) -> dict[str, float]:
    """Where one loop run's seconds went: the commands (sandbox start included), each activity
    beyond them, waiting in task queues, and the rest (workflow tasks, the client's calls)."""
    pool = await get_pool(world.settings.require_database_url())
    commands = sum(c.duration_s for r in await loop_rows.reports(pool, handle.id) for c in r.commands)
    spent: dict[str, float] = defaultdict(float)
    for name, queued, started, closed in await activity_spans(handle):
        spent["queued"] += started - queued
        spent[name.rsplit(".", 1)[-1]] += closed - started
    rest = wall_s - sum(spent.values())
    spent["run_command"] -= commands  # what the activity does around its command
    spent |= {"commands": commands, "workflow_tasks_and_client": rest}
    return {part: round(seconds, 3) for part, seconds in spent.items()}


def overhead_spec(rounds: int, command_s: float) -> LoopSpec:
    sleep = f"sleep {command_s:g}"
    return LoopSpec(
        name="overhead",
        mission=Mission(objective=f"verify passes in round {rounds}"),
        repo=RepoSource(github="bench/small"),
        commands={Step.PLAY: sleep, Step.VERIFY: f"{sleep} && test {{round}} -ge {rounds}"},
        limits=Limits(total_rounds=rounds, max_consecutive_failures=rounds, no_progress_rounds=rounds),
    )


def shell_script(spec: LoopSpec, path: Path, rounds: int, in_bwrap: bool) -> str:
    """The loop's command lines as it renders them, one per line; each in its bwrap call if asked."""
    lines = []
    for round_, step in ((r, s) for r in range(1, rounds + 1) for s in (Step.PLAY, Step.VERIFY)):
        values = {"workspace": str(path), "project_root": str(path), "round": str(round_), "last_error": ""}
        line = render_command(spec.commands[step], values)
        if in_bwrap:
            env = step_environment(str(path), str(path), round_, step.value)
            line = shlex.join(
                prlimit_argv(spec.limits) + bwrap_argv(line, path, env, spec.limits, spec.sandbox)
            )
        lines.append(line)
    return "\n".join(lines) + "\n"


async def measure_overhead(world: World, sizes: Sizes, bar: Progress) -> dict[str, Any]:
    world.repo("bench/small", lambda path: (path / "README.md").write_text("A small project.\n"))
    task = bar.add_task("loop overhead", total=1 + sizes.repeats * len(LOOP_VARIANTS))
    warm, _ = await world.run(overhead_spec(2, 0))  # its workspace is the shell scripts' folder
    bar.advance(task)
    spec, path = overhead_spec(sizes.rounds, sizes.command_s), world.host.repo(warm.id)
    scripts = {v: shell_script(spec, path, sizes.rounds, v == "shell_bwrap") for v in LOOP_VARIANTS[1:]}
    if as_root():  # as `run_sandboxed` does: the command runs as the workspace's own uid
        hand_over(path, sandbox_uid(path))
    walls: dict[str, list[float]] = {v: [] for v in LOOP_VARIANTS}
    parts = []
    for i in range(sizes.repeats):
        for variant in rotated(LOOP_VARIANTS, i):
            bar.update(task, description=f"loop overhead: {variant}")
            if variant == "loop":
                (handle, result), wall = await timed(world.run(spec))
                if result.status is not LoopStatus.SUCCESS or result.rounds != sizes.rounds:
                    raise RuntimeError(f"the loop ended {result.status} in {result.rounds}: {result.reason}")
                parts.append(await time_spent(world, handle, wall))
            else:
                script = ["/bin/sh", "-c", scripts[variant]]  # its last line, the passing verify, exits 0
                run = asyncio.to_thread(subprocess.run, script, cwd=path, env=SCRIPT_ENV, check=True)
                _, wall = await timed(run)
            walls[variant].append(wall)
            bar.advance(task)
    # `run_command` checks that bwrap works before each command.
    probes = [(await timed(asyncio.to_thread(sandbox_problem)))[1] * 1000 for _ in range(PROBES)]
    median = {v: statistics.median(w) for v, w in walls.items()}
    spent = {k: round(statistics.median(p.get(k, 0.0) for p in parts), 3) for k in parts[0]}
    fixed = sum(spent.get(k, 0.0) for k in ("start", "acquire_workspace", "finish"))
    bwrap_s = median["shell_bwrap"] - median["shell"]  # bwrap's own start and end, 2 a round
    per_round = {
        "over_shell": median["loop"] - median["shell"],
        "over_shell_bwrap": median["loop"] - median["shell_bwrap"],
        "over_shell_less_start_acquire_finish": median["loop"] - median["shell"] - fixed,
    }
    ratios = {
        f"loop_over_{base}": {"median": round(median["loop"] / median[base], 3),
                              "min": round(min(walls["loop"]) / min(walls[base]), 3)}
        for base in LOOP_VARIANTS[1:]
    }  # fmt: skip
    return {
        "wall_s": {v: summary(w) for v, w in walls.items()}, **ratios,
        "per_round_ms": {k: round(v / sizes.rounds * 1000, 1) for k, v in per_round.items()},
        "bwrap_ms_per_command": round(bwrap_s / (2 * sizes.rounds) * 1000, 1),
        "sandbox_probe_ms": round(statistics.median(probes), 1), "loop_time_s_median": spent,
        "loop_time_per_round_ms": {k: round(v / sizes.rounds * 1000, 1) for k, v in spent.items()},
    }  # fmt: skip


def write_big_project(path: Path, sizes: Sizes) -> None:
    """Seeded random files (incompressible, like build artefacts or media) and a few modules."""
    rng = random.Random(SEED)
    (path / "data").mkdir()
    (path / "src").mkdir()
    for i in range(sizes.repo_files):
        (path / "data" / f"blob-{i:03d}.bin").write_bytes(rng.randbytes(sizes.file_kb << 10))
    module = "".join(f"def step_{j}(x):\n    return x + {j}\n\n\n" for j in range(100))
    for i in range(SOURCE_FILES):
        (path / "src" / f"module_{i}.py").write_text(module)


async def stored_diff(world: World, sizes: Sizes) -> tuple[str, int]:
    """A fix's diff of `diff_files` modules and one new file, stored as a round's diff is."""
    path = world.host.workspaces / "diff-maker"
    remote = workspace.GitRemote(f"{world.git.url}/bench/big.git", GITHUB_TOKEN)
    base = await workspace.clone(remote, "main", path)
    for module in (path / "src" / f"module_{i}.py" for i in range(sizes.diff_files)):
        text = module.read_text().replace("return x + 7\n", "return x - 7\n")
        module.write_text(text + "\n\ndef added(x):\n    return -x\n")
    (path / "src" / "new_module.py").write_text("VALUE = 1\n")
    patch = await workspace.diff(path, base)
    workspace.remove(path)
    return await loop_rows.save_diff(await get_pool(world.settings.require_database_url()), patch), len(patch)


async def lost_workspace(world: World, sizes: Sizes) -> dict[str, Any]:
    """A real loop whose workspace goes in round 2 (its repository removed while verify runs), so
    the next activity finds it lost and the loop rebuilds it from round 1's stored diff."""
    files = " ".join(f"src/module_{i}.py" for i in range(sizes.diff_files))
    play = f"for f in {files}; do echo '# round' {{round}} >> $f; done"
    spec = LoopSpec(
        name="lost", mission=Mission(objective="pass in round 2"), repo=RepoSource(github="bench/big"),
        commands={Step.PLAY: play, Step.VERIFY: "sleep 1 && test {round} -ge 2"},
    )  # fmt: skip
    handle = await world.start(spec)
    verify_log, deadline = world.host.log(handle.id, 2, Step.VERIFY.value), time.monotonic() + LOST_DEADLINE_S
    while not verify_log.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("round 2's verify never started")
        await asyncio.sleep(0.02)
    await asyncio.to_thread(shutil.rmtree, workspace.git_dir(world.host.repo(handle.id)))
    result = await handle.result()
    spans = await activity_spans(handle)
    acquires = [span for span in spans if span[0] == LoopActivity.ACQUIRE_WORKSPACE]
    if result.status is not LoopStatus.SUCCESS or len(acquires) != 2:
        raise RuntimeError(f"the lost-workspace loop ended {result.status} with {len(acquires)} acquires")
    (_, first_queued, _, first_closed), (_, queued, started, closed) = acquires
    noticed = max(span[3] for span in spans if span[3] <= queued)  # the save_diff that failed
    return {
        "first_clone_s": round(first_closed - first_queued, 3), "reacquire_s": round(closed - queued, 3),
        "reacquire_activity_s": round(closed - started, 3),
        "lost_noticed_to_rebuilt_s": round(closed - noticed, 3), "rounds": result.rounds,
    }  # fmt: skip


async def acquire_once(world: World, variant: str, bare: Path, sha: str) -> tuple[Path, float]:
    """One workspace made the `variant` way under a new loop id: its path and the seconds taken."""
    loop_id = f"bench-acquire-{uuid.uuid4().hex[:8]}"
    path, diff = world.host.repo(loop_id), sha if variant == "acquire_with_diff" else None
    if variant == "clone_without_http":  # git's own transport from the same bare repository
        clone = workspace.git(None, "clone", "--quiet", "--no-tags", "--no-local", "--", str(bare), str(path))
        return path, (await timed(clone))[1]
    request = AcquireRequest(loop_id=loop_id, repo=RepoSource(github="bench/big"), diff_sha=diff)
    made, took = await timed(ActivityEnvironment().run(acquire_workspace, request))
    if made.restored_diff != diff:
        raise RuntimeError(f"{variant}: restored {made.restored_diff}")
    return path, took


async def measure_reacquire(world: World, sizes: Sizes, bar: Progress) -> dict[str, Any]:
    task = bar.add_task("re-acquire: making the repository", total=2 + sizes.repeats * len(ACQUIRE_VARIANTS))
    bare = await asyncio.to_thread(world.repo, "bench/big", lambda path: write_big_project(path, sizes))
    sha, diff_bytes = await stored_diff(world, sizes)
    bar.advance(task)
    pool = await get_pool(world.settings.require_database_url())
    seconds: dict[str, list[float]] = {v: [] for v in ACQUIRE_VARIANTS}
    load_ms, apply_ms = [], []
    for i in range(sizes.repeats):
        for variant in rotated(ACQUIRE_VARIANTS, i):
            bar.update(task, description=f"re-acquire: {variant}")
            path, took = await acquire_once(world, variant, bare, sha)
            seconds[variant].append(took)
            if variant == "acquire_no_diff":  # the stored diff's part, alone
                patch, load_s = await timed(loop_rows.load_diff(pool, sha))
                load_ms.append(load_s * 1000)
                apply_ms.append((await timed(workspace.apply(path, patch or b"")))[1] * 1000)
            await asyncio.to_thread(shutil.rmtree, path.parent)
            bar.advance(task)
    bar.update(task, description="re-acquire: a loop whose workspace is lost")
    in_a_loop = await lost_workspace(world, sizes)
    bar.advance(task)
    pack = sum(f.stat().st_size for f in (bare / "objects" / "pack").glob("*.pack")) / 2**20
    files_mb = sizes.repo_files * sizes.file_kb / 1024
    return {
        "served_by": "git http-backend behind tests/fakes/git_http.py (smart HTTP, token), one pack",
        "repo": {"files_mb": round(files_mb, 1), "pack_mb": round(pack, 1), "diff_bytes": diff_bytes},
        "seconds": {v: summary(s) for v, s in seconds.items()},
        "mb_per_s": {v: round(files_mb / statistics.median(s), 1) for v, s in seconds.items()},
        "diff_load_ms": summary(load_ms, 1), "diff_apply_ms": summary(apply_ms, 1), "in_a_loop": in_a_loop,
    }  # fmt: skip


async def run(stack: Stack, sizes: Sizes) -> dict[str, Any]:
    root = stack.settings.state_dir / f"loop-bench-{uuid.uuid4().hex[:6]}"
    try:
        with Progress(console=Console(emoji=False, stderr=True)) as bar:
            async with loop_world(stack, root) as world:
                overhead = await measure_overhead(world, sizes, bar)
                reacquire = await measure_reacquire(world, sizes, bar)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    met = overhead["loop_over_shell"]["median"] <= TARGET_LOOP_OVER_SHELL
    return {
        "bench": "loops", "sizes": asdict(sizes), "overhead": overhead, "reacquire": reacquire,
        "targets": {"loop_within_1.1x_shell": met},
    }  # fmt: skip
