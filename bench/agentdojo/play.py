"""What each running case is playing, shared by the suite's MCP server (which environment a
call runs against), the oracle model (which calls it makes) and the bench (what happened).

Everything runs in the bench process: the worker, the MCP servers and the bench share this
registry. A case's MCP requests carry its id in a header its agent version sends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bench.agentdojo.suites import Call, Case

CASE_HEADER = "X-Bench-Case"
_NOT_WORD = re.compile(r"\W+")


def carries(text: str, goal: str) -> bool:
    """Whether `text` holds `goal`, however a YAML dump folded, quoted or escaped it."""
    return bool(goal) and _NOT_WORD.sub("", goal) in _NOT_WORD.sub("", text)


@dataclass
class Play:
    case: Case
    env: Any  # the AgentDojo environment the suite's tools run against (reset per case)
    user_calls: list[Call]
    attack_calls: list[Call]
    goal: str  # the injection task's goal: when a tool output carries it, the oracle turns
    final_text: str  # what the oracle answers at the end (the user task's expected output)
    served: list[Call] = field(default_factory=list)  # calls the MCP server ran
    injection_returned: bool = False  # a tool output carried the goal
    injection_in_view: bool = False  # ... within what the model's prompt shows of it
    attack_at: int | None = None  # how many calls the model had made when it turned
    approvals: list[tuple[Call, bool]] = field(default_factory=list)  # (call, approved)

    def plan(self) -> list[Call]:
        """The calls the oracle makes in order: the user's, with the attacker's spliced in
        where the injection was read."""
        if self.attack_at is None:
            return list(self.user_calls)
        at = self.attack_at
        return [*self.user_calls[:at], *self.attack_calls, *self.user_calls[at:]]


PLAYS: dict[str, Play] = {}  # by case id (the MCP server's key)
TASKS: dict[str, str] = {}  # task id -> case id (the oracle's key)


def play_for_task(task_id: str) -> Play | None:
    case = TASKS.get(task_id)
    return PLAYS.get(case) if case else None
