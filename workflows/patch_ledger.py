"""The patch ledger: every workflow patch in use, what it guards, and when it is retired.

A change to workflow code that a history already in flight could not replay goes behind a
patch, and the patch has a life (samples-python `hello/hello_patch.py`):

1. `if patched(ENTRY): <new code> else: <old code>`. Runs started before the change replay
   the old branch; runs started after record a marker and take the new one.
2. After `ENTRY.deprecate_after` no run from before the change is still open: keep only the
   new code, call `deprecate_patch(ENTRY)` where the branch was, and set `deprecated_on`.
3. After `ENTRY.remove_after` no run that recorded the marker is still open: delete the call
   and the entry.

Workflow code patches only through `patched` and `deprecate_patch` below, each with an entry
of `LEDGER`; `tests/workflow/test_patch_ledger.py` fails on a direct `workflow.patched` or
`workflow.deprecate_patch`, an entry missing from the ledger, and a patch past its date.
Version 0.1.0 is the baseline (CHANGELOG.md): it has no patches; later ones are listed here.

Workflow code: deterministic, no I/O; the dates are only read by that test.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from config.agent import MAX_APPROVAL_TTL
    from config.fields import parse_duration

# How long a run can stay open, and so how long a history written by the code before a
# change can still be replayed by the code after it (a continue-as-new run starts on the
# code of its day). A run's long waits are on people: an approval, for at most the longest
# TTL the config allows, and then a budget extension, which waits as long
# (`HumanWaits.budget_extension`). The margin covers the work between the waits, a question
# answered within the follow-up wait, and queries on runs that just closed (they replay too).
LONGEST_APPROVAL_WAIT = timedelta(seconds=parse_duration(MAX_APPROVAL_TTL))
LONGEST_BUDGET_WAIT = LONGEST_APPROVAL_WAIT
LIFETIME_MARGIN = timedelta(days=7)
TASK_LIFETIME = LONGEST_APPROVAL_WAIT + LONGEST_BUDGET_WAIT + LIFETIME_MARGIN


@dataclass(frozen=True)
class Patch:
    """One patch id in use by workflow code, and its dates."""

    id: str  # the marker's id in history: permanent once released
    added: date  # the day the release carrying the patch went out
    guards: str  # what the new branch changes, for whoever retires it
    deprecated_on: date | None = None  # the day `patched` became `deprecate_patch`

    @property
    def deprecate_after(self) -> date:
        """From the day after this, no run that took the old branch is open."""
        return self.added + TASK_LIFETIME

    @property
    def remove_after(self) -> date:
        """From the day after this, no run that recorded the marker as `patched` is open."""
        return (self.deprecated_on or self.deprecate_after) + TASK_LIFETIME


# Entries are module constants (`NAME = Patch(...)`) listed here; code passes the constant.
LOOP_SHUTDOWN_IS_LOST = Patch(
    "loop-shutdown-is-lost",
    date(2026, 11, 26),
    "a loop's activity cut short by its worker's graceful stop (temporalio's WorkerShutdown: "
    "a deploy's SIGTERM, Ctrl-C) is a lost workspace, taken again elsewhere, not an ERROR",
)
PUBLISHED_APPROVAL = Patch(
    "approvers-search-attribute",
    date(2026, 11, 27),
    "a pending approval is published for the inbox (`workflows.approver_attribute`): the "
    "OpenLoopApprovers search attribute and the pending_approval memo, set and removed",
)
LEDGER: tuple[Patch, ...] = (LOOP_SHUTDOWN_IS_LOST, PUBLISHED_APPROVAL)


def patched(entry: Patch) -> bool:
    """Whether this run takes the new branch of `entry` (`workflow.patched`)."""
    return workflow.patched(entry.id)


def deprecate_patch(entry: Patch) -> None:
    """`entry`'s new branch is the only one left (`workflow.deprecate_patch`)."""
    workflow.deprecate_patch(entry.id)
