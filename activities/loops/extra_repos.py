"""`sandbox.repos`: more repositories cloned into a workspace when it is acquired, which its
commands may read and never change.

The worker clones each one outside the sandbox, with the same credentials as the workspace's
own repository (`workspace.git`: the token is a one-command HTTP header, never in a URL, a
file or an argument), into its folder inside the workspace, so the coding tools read it like
the rest. It never joins the change the loop or task proposes: each clone holds a repository
of its own, which the workspace's diff always leaves out (`workspace.diff`), and every
sandboxed command sees its folder through a read-only bind (`bwrap.bwrap_argv`), so it cannot
be changed or lose its `.git`. Before each command `bwrap.repos_moved` checks each folder is
still the plain folder cloned here, so a command cannot swap it for a link that would have
bwrap show the sandbox some other host path.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from activities.github.client import installation_token
from activities.loops import workspace
from config.settings import Settings
from workflows.loop_types import ExtraRepo

__all__ = ["add_repos"]


def _folder(root: Path, repo: ExtraRepo) -> Path:
    """Where `repo` goes, its parent folders made; WorkspaceError if that is not plainly inside."""
    target = root / repo.into
    if os.path.lexists(target):
        raise workspace.WorkspaceError(
            f"sandbox.repos: {repo.into} already exists in the workspace's repository; "
            "choose another `into` for it"
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise workspace.WorkspaceError(f"sandbox.repos: cannot make {repo.into}: {error.strerror}") from None
    # A link in the repository on the way there would put the clone outside the workspace.
    if Path(os.path.realpath(target.parent)) != root.resolve() / Path(repo.into).parent:
        raise workspace.WorkspaceError(f"sandbox.repos: a folder above {repo.into} is a link; choose another")
    return target


async def _clone(repo: ExtraRepo, target: Path, settings: Settings) -> None:
    branch = ["--branch", repo.base] if repo.base else []
    if repo.path:
        # No hardlinks: the workspace is handed to the sandbox's user, the checkout is not.
        source, token, depth = repo.path, None, ["--no-hardlinks"]
    else:
        assert repo.github
        source = f"{settings.github_git_url.rstrip('/')}/{repo.github}.git"
        token = await asyncio.to_thread(installation_token, settings, repo.github)
        depth = ["--depth=1"]  # read, never changed: the history is not needed
    await workspace.git(
        None, "clone", "--quiet", "--no-tags", *depth, *branch, "--", source, str(target), token=token
    )


async def add_repos(root: Path, repos: list[ExtraRepo], settings: Settings) -> None:
    """Clone every one of `repos` into the workspace at `root`; WorkspaceError naming the one
    that could not be."""
    for repo in repos:
        target = await asyncio.to_thread(_folder, root, repo)
        try:
            await _clone(repo, target, settings)
        except workspace.WorkspaceError as error:
            raise workspace.WorkspaceError(f"sandbox.repos: {repo.github or repo.path}: {error}") from None
