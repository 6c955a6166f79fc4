"""`openloop loops doctor FILE`: is this loop runnable here? Each check names what is wrong.

It reads the file (every problem with its line), then checks each command's program can be
found, the repository can be reached with the credentials it would be cloned with, the
sandbox can be made, and the baseline's pattern compiles (the file reader checks that).
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from activities.loops.sandbox import sandbox_problem
from activities.loops.workspace import WorkspaceError, git
from activities.store.agents import get_agent
from activities.store.db import get_pool
from config.settings import Settings
from surfaces.cli.env_file_check import env_file_check
from surfaces.cli.extra_repo_check import extra_repo_checks
from workflows.loop_types import LoopSpec, Step

# What an agent fixer needs: to read, change and test the code in the workspace.
_FIXER_PERMISSIONS = ("code:read", "code:write", "code:run")

_SHELL_WORDS = {"cd", "echo", "exit", "true", "false", "test", "[", "export", "set", "env", "exec"}


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def _program(command: str) -> str | None:
    """The program a command line starts, skipping `VAR=value` prefixes; None if unclear."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for word in words:
        if "=" in word.split("/")[0] and not word.startswith(("/", ".")):
            continue
        return word
    return None


def command_checks(spec: LoopSpec, project: Path | None) -> list[Check]:
    checks = []
    for step, command in [(s.value, c) for s, c in spec.commands.items() if not _agent_step(spec, s)]:
        program = _program(command)
        if program is None:
            checks.append(Check(f"{step} command", False, f"cannot read the command line: {command}"))
            continue
        found = (
            program in _SHELL_WORDS
            or shutil.which(program) is not None
            or (project is not None and (project / program).exists())
        )
        detail = f"{program} found" if found else f"{program!r} is not on PATH or in the project"
        if not found and _made_by_setup(spec, program):
            found, detail = True, f"{program} comes from setup"
        checks.append(Check(f"{step} command", found, detail))
    return checks


def _made_by_setup(spec: LoopSpec, program: str) -> bool:
    """A path inside the workspace (`.venv/bin/python`) that the sandbox's setup can make."""
    return spec.sandbox.setup is not None and "/" in program and not program.startswith("/")


def setup_check(spec: LoopSpec) -> Check:
    """The setup's programs are there; where its network goes."""
    setup = spec.sandbox.setup
    assert setup is not None
    programs = [_program(command) for command in setup.commands]
    missing = [p or c for p, c in zip(programs, setup.commands, strict=True) if not _setup_program(spec, p)]
    if missing:
        return Check("setup", False, f"{missing[0]!r} is not on PATH or in the project")
    network = setup.network
    reach = (
        f"network only to {', '.join(network)}" if isinstance(network, list)
        else "the worker's network" if network else "no network"
    )  # fmt: skip
    cached = "cached on the worker per lockfiles" if setup.cache else "run for every workspace"
    return Check("setup", True, f"{len(setup.commands)} command(s), {reach}; {cached}")


def _setup_program(spec: LoopSpec, program: str | None) -> bool:
    if program is None:
        return False
    project = Path(spec.repo.path) if spec.repo.path else None
    return (
        program in _SHELL_WORDS
        or shutil.which(program) is not None
        or (project is not None and (project / program).exists())
        or _made_by_setup(spec, program)  # by an earlier setup command
    )


def _agent_step(spec: LoopSpec, step: Step) -> bool:
    return step is Step.FIX and spec.fixer_agent is not None


async def fixer_check(spec: LoopSpec, settings: Settings) -> Check:
    """`fix: {agent: NAME}`: the agent is applied and may read, change and test code."""
    name = spec.fixer_agent
    try:
        stored = await get_agent(await get_pool(settings.require_database_url()), name or "", "default")
    except (RuntimeError, OSError) as exc:
        return Check("fix agent", False, f"cannot look {name} up: {exc}")
    if stored is None:
        return Check("fix agent", False, f"no agent {name!r} is applied: openloop agents apply -f FILE")
    granted = {
        p for grant in stored.config.spec.tools if grant.name.startswith("code.") for p in grant.permissions
    }
    missing = [p for p in _FIXER_PERMISSIONS if p not in granted]
    if missing:
        return Check("fix agent", False, f"{name} has no code.* tool with {', '.join(missing)}")
    verify = (
        ""
        if stored.config.spec.coding.verify
        else "; its own spec.coding.verify is unset (the loop's is used)"
    )
    return Check(
        "fix agent", True, f"{name} (version {stored.version}) can read, change and test code{verify}"
    )


def _local_check(path: Path) -> Check:
    if path.is_dir():
        return Check("repository", True, f"{path} (a local folder)")
    return Check("repository", False, f"{path} is not a folder")


async def repo_check(spec: LoopSpec, settings: Settings) -> Check:
    repo = spec.repo
    if repo.path:
        return _local_check(Path(repo.path))
    url = f"{settings.github_git_url.rstrip('/')}/{repo.github}.git"
    token = settings.github_token.get_secret_value() if settings.github_token else None
    if token is None and not settings.github_app_id:
        return Check("credentials", False, "no GitHub credentials: set GITHUB_TOKEN or GITHUB_APP_ID + key")
    try:
        refs = await asyncio.wait_for(git(None, "ls-remote", "--heads", url, repo.base, token=token), 30)
    except (WorkspaceError, TimeoutError) as exc:
        return Check("repository", False, f"{repo.github} cannot be reached: {exc}")
    if not refs.strip():
        return Check("repository", False, f"{repo.github} has no branch {repo.base!r}")
    return Check("repository", True, f"{repo.github}@{repo.base} reachable")


def sandbox_check(spec: LoopSpec) -> Check:
    if spec.sandbox.provider == "none":
        return Check("sandbox", True, "provider none: commands run UNSANDBOXED, and every report says so")
    problem = sandbox_problem()
    works = "bubblewrap works here"
    if isinstance(spec.sandbox.network, list):
        works += f"; network only to {', '.join(spec.sandbox.network)}, through the worker's egress proxies"
    return Check("sandbox", problem is None, problem or works)


async def doctor(spec: LoopSpec, settings: Settings) -> list[Check]:
    project = Path(spec.repo.path) if spec.repo.path else None
    checks = [Check("loop file", True, f"{spec.source or spec.name} reads cleanly")]
    checks += command_checks(spec, project)
    if spec.fixer_agent is not None:
        checks.append(await fixer_check(spec, settings))
    checks.append(await repo_check(spec, settings))
    checks.append(sandbox_check(spec))
    if spec.sandbox.setup is not None:
        checks.append(setup_check(spec))
    if spec.sandbox.env_file is not None:
        checks.append(Check("env file", *env_file_check(spec.sandbox.env_file, spec.sandbox.env_from)))
    checks += [Check(*found) for found in await extra_repo_checks(spec.sandbox.repos, settings)]
    if spec.baseline is not None:
        checks.append(Check("baseline", True, f"{spec.baseline.metric_name}: pattern compiles"))
    return checks
