"""What one runner's output said: its failing test ids and how many tests ran."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reading:
    failing: frozenset[str]  # the failing test ids; empty: none failed
    ran: int | None  # tests that ran (not skipped); None: the output did not say
    finished: bool = True  # the runner printed its end (a summary), so no failing test was missed

    @staticmethod
    def merged(readings: list[Reading]) -> Reading | None:
        """Several runners in one command (`make test`): their failures and counts together."""
        if not readings:
            return None
        counts = [reading.ran for reading in readings]
        return Reading(
            frozenset().union(*(reading.failing for reading in readings)),
            None if None in counts else sum(count or 0 for count in counts),
            all(reading.finished for reading in readings),
        )
