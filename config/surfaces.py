"""Where an agent lives: its Slack channels (and who may start it there) and its GitHub
repositories (mentions, and the CI watch). Pydantic only."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from config.fields import ProblemPath, Strict, rule_error

# GitHub's rules: owner 1-39 letters, digits or dashes (not first); repo letters, digits, . _ -
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")


class TriggerPolicy(Strict):
    """Who may start a task from a surface. An empty policy means everyone in the channel."""

    everyone: bool = True
    users: list[str] = []
    usergroups: list[str] = []
    bots: list[str] = Field(default=[], description="Bot ids (B0123ABCD) whose mentions may start a task")


class SlackSurface(Strict):
    channels: list[str] = Field(
        min_length=1, description="Slack channel ids (C0123ABCD) or names (#dev-platform), resolved at apply"
    )
    triggers: TriggerPolicy = TriggerPolicy()
    # What the Slack app offers (`openloop slack manifest` asks for the scopes and events):
    app_home: bool = Field(default=True, description="The Home tab: your tasks, approvals, spend")
    assistant: bool = Field(
        default=False, description="Answer in Slack's assistant threads (the agent's DMs and split view)"
    )


class GitHubCIWatch(Strict):
    enabled: bool = True
    branches: list[str] = ["main"]
    report_to: list[Literal["commit_comment", "pr_comment", "slack"]] = ["pr_comment"]
    # When the investigation finds the cause in the code, fix it in a workspace and propose
    # a draft pull request (the agent needs the code.* tools and github.create_pull_request).
    propose_fixes: bool = False


class GitHubSurface(Strict):
    repos: list[str] = Field(min_length=1, description="owner/name of each repository")
    handle: str = "@openloop"
    allowed_associations: list[str] = ["OWNER", "MEMBER", "COLLABORATOR"]
    allowed_bots: list[str] = []
    ci: GitHubCIWatch = GitHubCIWatch(enabled=False)

    @field_validator("repos")
    @classmethod
    def _owner_slash_name(cls, repos: list[str]) -> list[str]:
        problems: list[tuple[ProblemPath, str]] = [
            (
                (index,),
                f"{repo!r} is not a repository name; write owner/name, e.g. acme/platform "
                "(letters, digits, dashes in the owner; letters, digits, . _ - in the name)",
            )
            for index, repo in enumerate(repos)
            if not _REPO.match(repo) or repo.split("/")[1] in (".", "..")
        ]
        if problems:
            raise rule_error(problems)
        return repos


class Surfaces(Strict):
    slack: SlackSurface | None = None
    github: GitHubSurface | None = None
    cli: bool = True
