"""`Outcome`: what handling one Slack event or click tells the ack, and what runs after it.

The HTTP endpoints, Socket Mode and the inbox all act on it the same way: send the status,
log the note, then run the follow-ups (best effort; Slack already has its ack).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger("openloop.slack")

Followup = Callable[[], Awaitable[None]]


@dataclass
class Outcome:
    """The ack's status, why (for logs), and what to do once Slack has the ack."""

    note: str
    status: int = 200
    followups: list[Followup] = field(default_factory=list)

    async def run_followups(self) -> None:
        for followup in self.followups:
            try:
                await followup()
            except Exception:  # a follow-up is best effort; the ack already went out
                log.exception("slack follow-up failed after %s", self.note)
