"""A playbook run the offline model answered says so: `playbooks runs` counts its offline steps,
`playbooks show` and `explain` mark each such step "answered offline" with the fields it could
not know, and a run that failed for want of one says offline in its reason and what to do next.
The answers are the offline model's own, for the shipped nightly scan and CI triage steps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from activities.store.playbooks import StoredRun
from surfaces.cli import playbook_runs, playbook_story
from surfaces.cli.main import app
from surfaces.cli.playbook_story import RunStory, StepTask, print_explained
from tests.unit.test_offline_playbook import ASSERTION, CI_EVENT, CI_TOOLS, RUNS, Conversation, request
from workflows.playbook_calls import RunRecord
from workflows.playbook_types import PlaybookRunStatus, StepRun, StepStatus

RUN = "playbook-nightly-deps-cron-2026-11-24T03:00:00Z"


def scan_answer() -> str:
    text, _ = request("nightly-deps", "scan", {"scheduled_at": "2026-11-24T03:00:00+00:00"})
    return Conversation(text, CI_TOOLS, {}).run()


def failed_scan() -> RunRecord:
    step = StepRun(
        name="scan", status=StepStatus.FAILED, task_id=f"{RUN}.scan.retry", answer=scan_answer(), attempts=2,
        reason="the answer did not have the declared output twice: 'critical' is missing",
    )  # fmt: skip
    return RunRecord(
        run_id=RUN, playbook="nightly-deps", version=1, event_name="cron", run_key="2026-11-24T03:00Z",
        status=PlaybookRunStatus.FAILED, steps=[step], reason=f"step scan failed: {step.reason}",
    )  # fmt: skip


def story(record: RunRecord) -> RunStory:
    steps = [StepTask(step, None) for step in record.steps]
    reason, action = playbook_story._now(record, steps)
    return RunStory(record, steps, reason, action)


def explained(record: RunRecord) -> str:
    out = Console(record=True, width=400)
    print_explained(story(record), out)
    return out.export_text()


def test_a_run_failed_for_a_count_only_a_model_could_know_says_it_was_answered_offline() -> None:
    text = explained(failed_scan())
    assert (
        "Reason: step scan failed: the answer did not have the declared output twice: 'critical' is "
        "missing (answered offline: the offline model cannot know critical, summary, issue_url)"
    ) in text, text
    assert "Next: Give the step's agent a model with a provider key (`openloop doctor`" in text, text
    assert "1. scan  FAILED · $0.0000 · 0 tokens · 2 answer(s) did not validate · answered offline" in text
    assert (
        "offline answered by the offline model (no model provider), which could not know critical, "
        "summary, issue_url"
    ) in text, text
    assert '"critical"' not in text  # no output, and no invented count anywhere


def test_a_run_the_offline_model_answered_in_full_names_its_offline_steps() -> None:
    text, _ = request("ci-triage", "investigate", CI_EVENT)
    answer = Conversation(
        text, CI_TOOLS, {"github.list_failed_runs": RUNS, "github.get_job_log": ASSERTION}
    ).run()
    step = StepRun(
        name="investigate", status=StepStatus.SUCCEEDED, answer=answer,
        output={"verdict": "real", "notes": "FAILED tests/test_calc.py::test_mean - assert 2.5 == 2.0"},
    )  # fmt: skip
    provider = StepRun(name="propose", status=StepStatus.SUCCEEDED, answer='Done.\n\n{"repo": "acme/demo"}')
    record = RunRecord(
        run_id="playbook-ci-triage-1", playbook="ci-triage", version=1, event_name="CIFailed", run_key="1",
        status=PlaybookRunStatus.SUCCEEDED, steps=[step, provider], reason="2 step(s) succeeded",
    )  # fmt: skip
    shown = explained(record)
    assert "Reason: 2 step(s) succeeded (answered offline: investigate)" in shown, shown
    assert "1. investigate  SUCCEEDED · $0.0000 · 0 tokens · answered offline" in shown, shown
    assert (
        "offline answered by the offline model (no model provider), from what it read or was given" in shown
    )
    assert "2. propose  SUCCEEDED · $0.0000 · 0 tokens\n" in shown  # a provider's answer: no mark


def test_playbooks_runs_counts_the_steps_answered_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    at = datetime(2026, 11, 24, 3, tzinfo=UTC)
    stored = StoredRun(failed_scan(), at, at, at)

    def rows(work: Any) -> list[StoredRun]:
        return [stored]

    monkeypatch.setattr(playbook_runs, "run_with_pool", rows)
    monkeypatch.setattr(playbook_runs, "console", Console(width=400, highlight=False, soft_wrap=True))
    result = CliRunner().invoke(app, ["playbooks", "runs"])
    assert result.exit_code == 0, result.output
    assert "nightly-deps v1 · FAILED · on cron · 0/1 steps · 1 answered offline · $0.0000" in result.output
