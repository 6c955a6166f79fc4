"""`spec.surfaces.zoom`: the meetings whose transcripts an agent summarises, and the channel
the summary goes to. Zoom is a surface without replies of its own: the summary is posted by
the `post_to` surface's poster, in that channel, and the task's memory and budget are that
channel's. Pydantic only (`config.surfaces` holds it in `Surfaces`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from config.fields import ProblemPath, Strict, rule_error


class ZoomPostTo(Strict):
    surface: Literal["slack", "discord"]
    channel: str = Field(
        min_length=1,
        description="One of the agent's channels there: a Slack id or #name, a Discord channel id",
    )


class ZoomSurface(Strict):
    """The meetings whose transcripts this agent summarises, and where the summary goes."""

    hosts: list[str] = Field(default=[], description="Zoom user ids or host emails whose meetings it takes")
    account: str | None = Field(
        default=None, description="A Zoom account id: with no hosts, every meeting of that account"
    )
    post_to: ZoomPostTo | None = Field(
        default=None, description="Where the summary goes (default: the first Slack, else Discord, channel)"
    )

    @model_validator(mode="after")
    def _takes_some_meetings(self) -> ZoomSurface:
        if not self.hosts and not self.account:
            raise rule_error(
                [
                    (
                        ("hosts",),
                        "no meetings to take: name the hosts (Zoom user ids or emails), "
                        "or set account to take every meeting of that Zoom account",
                    )
                ]
            )
        return self

    def takes(self, host_id: str, host_email: str, account_id: str) -> bool:
        """Whether a meeting of this host (in this account) is this agent's."""
        if self.account and self.account != account_id:
            return False
        if not self.hosts:
            return True
        email = host_email.lower()
        return any(h == host_id or (email != "" and h.lower() == email) for h in self.hosts)

    def names_host(self, host_id: str, host_email: str) -> bool:
        """Whether it lists this host (an agent naming the host wins over a whole account's)."""
        return bool(self.hosts) and self.takes(host_id, host_email, self.account or "")


def is_discord_id(channel: str) -> bool:
    return channel.isdigit()


def zoom_target(zoom: ZoomSurface, slack: list[str], discord: list[str]) -> tuple[str, str] | None:
    """(surface, channel as written) the summary goes to, given the agent's Slack and Discord
    channels; None when it has nowhere to go."""
    if zoom.post_to is not None:
        return zoom.post_to.surface, zoom.post_to.channel.strip()
    if slack:
        return "slack", slack[0]
    ids = [c for c in discord if is_discord_id(c)]
    return ("discord", ids[0]) if ids else None


def post_to_problem(
    zoom: ZoomSurface, slack: list[str], discord: list[str]
) -> tuple[ProblemPath, str] | None:
    """Why the summary has nowhere (or nowhere of the agent's own) to go, if it has not. The
    path is below `spec.surfaces`."""
    post_to = zoom.post_to
    if post_to is None:
        if zoom_target(zoom, slack, discord) is not None:
            return None
        where = "its Discord channels are names" if discord else "the agent has no Slack or Discord channel"
        return (
            ("zoom", "post_to"),
            f"a meeting's summary has nowhere to go ({where}): set post_to: {{surface: slack, "
            "channel: C0123ABCD}, a channel bound under spec.surfaces.slack (or discord, by id)",
        )
    channel = post_to.channel.strip()
    bound = slack if post_to.surface == "slack" else discord
    if post_to.surface == "slack":
        # A #name is resolved to its id at apply, like the channels: checked again when used.
        if channel in bound or (channel.startswith("#") and bound):
            return None
    elif not is_discord_id(channel):
        return (
            ("zoom", "post_to", "channel"),
            f"{channel!r} is not a Discord channel id; write the id (a snowflake such as "
            "1234567890123456789) of one of spec.surfaces.discord.channels",
        )
    elif channel in bound:
        return None
    return (
        ("zoom", "post_to", "channel"),
        f"{channel!r} is not one of this agent's {post_to.surface} channels ({', '.join(bound) or 'none'}); "
        f"bind it under spec.surfaces.{post_to.surface}.channels, or post to one that is",
    )
