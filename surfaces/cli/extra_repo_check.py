"""`openloop loops doctor`'s check of `sandbox.repos`: each GitHub repository answers with the
credentials the worker would clone it with and has the branch named, and each local one is a
git checkout. One (name, ok, detail) per repository."""

from __future__ import annotations

import asyncio
from pathlib import Path

from activities.loops.workspace import WorkspaceError, git
from config.settings import Settings
from workflows.loop_types import ExtraRepo

REACH_TIMEOUT_S = 30.0


async def extra_repo_checks(repos: list[ExtraRepo], settings: Settings) -> list[tuple[str, bool, str]]:
    checks = []
    for repo in repos:
        name = f"repo {repo.into}"
        if repo.path:
            ok = (Path(repo.path) / ".git").exists()
            detail = f"{repo.path} (a local checkout)" if ok else f"{repo.path} is not a git checkout"
            checks.append((name, ok, detail))
            continue
        url = f"{settings.github_git_url.rstrip('/')}/{repo.github}.git"
        token = settings.github_token.get_secret_value() if settings.github_token else None
        ref = f"refs/heads/{repo.base}" if repo.base else "HEAD"
        try:
            refs = await asyncio.wait_for(git(None, "ls-remote", url, ref, token=token), REACH_TIMEOUT_S)
        except (WorkspaceError, TimeoutError) as exc:
            checks.append((name, False, f"{repo.github} cannot be reached: {exc}"))
            continue
        if not refs.strip():
            checks.append((name, False, f"{repo.github} has no branch {repo.base!r}"))
        else:
            checks.append(
                (name, True, f"{repo.github}@{repo.base or 'its default branch'} reachable, read-only")
            )
    return checks
