"""Where an agent lives: its Slack channels (and who may start it there), its GitHub
repositories (mentions, and the CI watch), its Discord channels, its Linear teams. Pydantic only.
What a surface is, and which this release serves, is `config.surface_kinds`."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from config.fields import ProblemPath, Strict, rule_error
from config.zoom_surface import ZoomSurface, post_to_problem, zoom_target

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


class DiscordTriggers(Strict):
    """Who may start or steer a task from Discord. Empty lists and `everyone` mean anyone who
    can post in the channel."""

    everyone: bool = True
    users: list[str] = Field(default=[], description="Discord user ids (snowflakes)")
    roles: list[str] = Field(default=[], description="Discord role ids, or role names (maintainers)")


class DiscordSurface(Strict):
    channels: list[str] = Field(
        min_length=1,
        description="Discord channel ids (snowflakes) or names (eng, #eng); threads belong to their channel",
    )
    guild: str | None = Field(default=None, description="The server (guild) id, when channel names are used")
    triggers: DiscordTriggers = DiscordTriggers()

    @field_validator("channels")
    @classmethod
    def _plain_names(cls, channels: list[str]) -> list[str]:
        return [c.strip().removeprefix("#") for c in channels]

    def binds(self, channel_id: str, channel_name: str | None) -> bool:
        """Whether a message in this channel (id, and its name when known) is this agent's."""
        name = (channel_name or "").lower()
        return any(c == channel_id or (name and c.lower() == name) for c in self.channels)


# A Linear team key (ENG) or a team id (a UUID); keys are upper case in Linear.
_TEAM = re.compile(r"^([A-Za-z][A-Za-z0-9_]{0,9}|[0-9a-fA-F-]{36})$")


class LinearTriggers(Strict):
    """Who may delegate an issue to the agent, mention it, or answer it in a session: the
    listed users when any are listed, else anyone who can see the team (`everyone`)."""

    everyone: bool = True
    users: list[str] = Field(default=[], description="Linear user ids, or their emails")


class LinearSurface(Strict):
    teams: list[str] = Field(
        min_length=1, description="Team keys (ENG) or team ids whose issues this agent works on"
    )
    triggers: LinearTriggers = LinearTriggers()

    @field_validator("teams")
    @classmethod
    def _keys_or_ids(cls, teams: list[str]) -> list[str]:
        problems: list[tuple[ProblemPath, str]] = [
            ((index,), f"{team!r} is not a Linear team key (ENG: letters and digits) or team id")
            for index, team in enumerate(teams)
            if not _TEAM.match(team.strip())
        ]
        if problems:
            raise rule_error(problems)
        return [t.strip().upper() if len(t.strip()) != 36 else t.strip().lower() for t in teams]

    def binds(self, team_key: str, team_id: str | None) -> bool:
        """Whether an issue of this team (its key, and its id when known) is this agent's."""
        return team_key.upper() in self.teams or (team_id or "").lower() in self.teams

    def may_trigger(self, user_id: str, email: str | None) -> bool:
        """Listed users only, when any are listed; else everyone (unless `everyone: false`)."""
        if not self.triggers.users:
            return self.triggers.everyone
        listed = {u.lower() for u in self.triggers.users}
        return user_id.lower() in listed or bool(email and email.lower() in listed)


class Surfaces(Strict):
    slack: SlackSurface | None = None
    github: GitHubSurface | None = None
    discord: DiscordSurface | None = None
    linear: LinearSurface | None = None
    zoom: ZoomSurface | None = None
    cli: bool = True

    def zoom_target(self) -> tuple[str, str] | None:
        """(surface, channel as written) a meeting's summary goes to; None without Zoom."""
        if self.zoom is None:
            return None
        return zoom_target(self.zoom, *self._chat_channels())

    def _chat_channels(self) -> tuple[list[str], list[str]]:
        return (self.slack.channels if self.slack else []), (self.discord.channels if self.discord else [])

    @model_validator(mode="after")
    def _zoom_posts_to_its_own_channel(self) -> Surfaces:
        problem = post_to_problem(self.zoom, *self._chat_channels()) if self.zoom else None
        if problem is not None:
            raise rule_error([problem])
        return self
