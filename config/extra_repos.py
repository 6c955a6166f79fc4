"""`sandbox.repos`: more repositories cloned read-only into the workspace when it is acquired,
beside the code the loop or coding task changes. Pydantic only.

    sandbox:
      repos:
        - acme/shared-schemas                      # into ./shared-schemas, its default branch
        - {github: acme/tools, base: v2, into: vendor/tools}
        - {path: /srv/checkouts/fixtures, into: testdata/fixtures}

`into` is a folder inside the workspace that the repository does not have already; the
commands see it read-only and the workspace's diff never includes it.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from pydantic import Field, model_validator

from config.fields import ProblemPath, Strict, rule_error

GITHUB_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


class ExtraRepoFields(Strict):
    github: str | None = None
    path: str | None = None
    base: str | None = Field(default=None, min_length=1)
    into: str = ""  # default: the repository's (or checkout's) name

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        """`owner/name` alone is a GitHub repository; with no `into`, its folder is its name."""
        if isinstance(value, str):
            value = {"github": value}
        if isinstance(value, dict) and not value.get("into"):
            source = value.get("github") or value.get("path")
            if isinstance(source, str) and source.strip("/"):
                value = {**value, "into": source.rstrip("/").rsplit("/", 1)[-1]}
        return value

    @model_validator(mode="after")
    def _source_and_folder(self) -> ExtraRepoFields:
        if (self.github is None) == (self.path is None):
            one = "give exactly one of `github: owner/name` or `path: /a/local/checkout`"
            raise rule_error([((), one)])
        if self.github is not None and not GITHUB_REPO.match(self.github):
            raise rule_error([(("github",), f"{self.github!r} is not a repository; write owner/name")])
        if self.path is not None and not self.path.strip():
            raise rule_error([(("path",), "write the folder of a local git checkout")])
        if problem := folder_problem(self.into):
            raise rule_error([(("into",), problem)])
        return self


def folder_problem(into: str) -> str | None:
    """What is wrong with `into` as a folder inside the workspace, or None."""
    parts = PurePosixPath(into).parts
    if into.startswith(("/", "~")):
        return f"{into!r} must be relative to the workspace's root, e.g. vendor/name"
    if not parts or any(part in ("", ".", "..") for part in into.split("/")):
        return f"{into!r} must name a folder inside the workspace, e.g. vendor/name (no `.`, `..` or `//`)"
    if ".git" in parts:
        return f"{into!r} would be inside the repository's .git; choose another folder"
    return None


def repos_problems(repos: list[ExtraRepoFields]) -> list[tuple[ProblemPath, str]]:
    """Two repositories in one folder, or one inside another's."""
    problems: list[tuple[ProblemPath, str]] = []
    for index, repo in enumerate(repos):
        mine = PurePosixPath(repo.into)
        for earlier in repos[:index]:
            theirs = PurePosixPath(earlier.into)
            if mine == theirs or mine.is_relative_to(theirs) or theirs.is_relative_to(mine):
                message = f"{repo.into!r} overlaps {earlier.into!r}; give each repository a folder of its own"
                problems.append((("repos", index, "into"), message))
    return problems
