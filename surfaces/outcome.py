"""`Outcome`: what handling one surface event or click tells the ack, and what runs after it.

Every surface's endpoints, Slack's Socket Mode, the Discord Gateway and the inboxes act on it
the same way: send the status, log the note, then run the follow-ups (best effort; the
sender already has its ack). A status of 500 or more means "not handled, try again".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger("openloop.surfaces")

Followup = Callable[[], Awaitable[None]]


@dataclass
class Outcome:
    """The ack's status, why (for logs), and what to do once the sender has the ack."""

    note: str
    status: int = 200
    followups: list[Followup] = field(default_factory=list)

    async def run_followups(self) -> None:
        for followup in self.followups:
            try:
                await followup()
            except Exception:  # a follow-up is best effort; the ack already went out
                log.exception("follow-up failed after %s", self.note)
