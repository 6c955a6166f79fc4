"""What an eval run produced: one `CaseRun` per case x repeat, gathered in an `EvalRun`.
Shared by the runner, the report, the JUnit writer, the store and the dashboard."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from surfaces.evals.checks import CheckResult

SKIPPED_BUDGET = "SKIPPED_BUDGET"  # not started: the run's --budget-usd was spent
TIMED_OUT = "TIMED_OUT"  # cancelled: it did not finish within the case timeout
CASE_ERROR = "EVAL_ERROR"  # the case could not be started or read back (the check says why)


@dataclass
class CaseRun:
    case_id: str
    repeat: int
    task_id: str
    status: str
    checks: list[CheckResult]
    reply: str = ""
    steps: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: int = 0

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]


@dataclass
class EvalRun:
    id: str
    dataset: str
    agent: str
    version: int
    model: str | None
    label: str
    started_at: datetime
    finished_at: datetime | None = None
    results: list[CaseRun] = field(default_factory=list)
    compared_to: str | None = None

    @property
    def passed(self) -> int:
        return sum(1 for r in self.results if r.passed)

    @property
    def pass_rate(self) -> float:
        return self.passed / len(self.results) if self.results else 0.0

    @property
    def cost_usd(self) -> float:
        return sum(r.cost_usd for r in self.results)

    def check_rates(self) -> dict[str, tuple[int, int]]:
        """Each check name's (passed, run) over every case and repeat, by kind of check
        (`tools_called`, `judge`, ...)."""
        rates: dict[str, tuple[int, int]] = {}
        for result in self.results:
            for check in result.checks:
                kind = check.name.split("[", 1)[0].split(":", 1)[0]
                passed, run = rates.get(kind, (0, 0))
                rates[kind] = (passed + check.passed, run + 1)
        return rates
