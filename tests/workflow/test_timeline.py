"""The step timeline read back from the committed histories of real runs (no server needed):
what `openloop tasks show` and `openloop explain` print for a finished task."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from surfaces.task_lookup import decision_chain, explain_story
from surfaces.timeline import Entry, Story, story_from_history
from workers.history import load_history
from workflows.types import TaskStatus

HISTORIES = Path(__file__).parent / "histories"


def story(name: str) -> Story:
    return story_from_history(load_history(HISTORIES / f"{name}.json").events)


def only(entries: list[Entry], kind: str, contains: str) -> Entry:
    [entry] = [e for e in entries if e.kind == kind and contains in e.what]
    return entry


def test_an_approved_action_shows_who_approved_it_and_when() -> None:
    told = story("approval_approved")
    assert told.result is not None and told.result.status == TaskStatus.SUCCESS
    asked = only(told.entries, "approval", "asked U_ALICE to approve github.create_issue")
    signal = only(told.entries, "signal", "approve from U_ALICE")
    approved = only(told.entries, "approval", "github.create_issue approved by U_ALICE")
    assert approved.who == signal.who == "U_ALICE"
    assert asked.at is not None and approved.at is not None
    assert approved.at - asked.at == pytest.approx(timedelta(hours=5), abs=timedelta(seconds=5))
    tool = only(told.entries, "tool", "github.create_issue: ok")
    assert tool.who == "U_ALICE" and tool.step == 1
    kinds = [e.kind for e in told.entries]
    assert kinds.index("approval") < kinds.index("signal") < kinds.index("tool")
    assert told.cost_usd == pytest.approx(0.0009)


def test_a_decision_through_the_update_reads_like_the_signal_and_a_refused_one_is_absent() -> None:
    told = story("approval_by_update")
    assert told.result is not None and told.result.status == TaskStatus.SUCCESS
    decided = only(told.entries, "signal", "approve from U_ALICE")
    approved = only(told.entries, "approval", "github.create_issue approved by U_ALICE")
    assert decided.who == approved.who == "U_ALICE"
    assert not [e for e in told.entries if "U_MALLORY" in e.what]  # refused by the validator


def test_an_expired_approval_shows_the_wait_and_that_nothing_ran() -> None:
    told = story("approval_expired")
    assert told.result is not None and told.result.status == TaskStatus.APPROVAL_EXPIRED
    asked = only(told.entries, "approval", "asked U_ALICE")
    expired = only(told.entries, "approval", "github.create_issue expired")
    assert asked.at is not None and expired.at is not None
    assert expired.at - asked.at >= timedelta(hours=72)
    assert not [e for e in told.entries if e.kind == "tool"]
    status, reason, action = explain_story(told, "task-x", "RUNNING")
    assert (status, reason) == ("APPROVAL_EXPIRED", "nobody approved github.create_issue within 72h")
    assert "ping an approver" in action


def test_model_steps_carry_tokens_and_cost_and_local_tool_runs_are_named() -> None:
    told = story("tool_call")
    models = [e for e in told.entries if e.kind == "model"]
    assert [e.step for e in models] == [1, 2]
    assert models[0].what == "scripted/model: 1 tool call(s): memory.search; 150+20 tokens"
    assert [e.cost_usd for e in models] == pytest.approx([0.0003, 0.0004])
    # memory.search ran inside the next model call: the tool still shows at its own step.
    assert only(told.entries, "tool", "memory.search: ok").step == 1


def test_tools_that_ran_inside_a_model_call_show_at_their_own_steps() -> None:
    told = story("folded_tools")
    steps = [(e.kind, e.step, e.what.split(":")[0]) for e in told.entries if e.kind in ("model", "tool")]
    assert steps == [
        ("model", 1, "scripted/model"),
        ("tool", 1, "memory.search"),
        ("model", 2, "scripted/model"),
        ("tool", 2, "memory.search"),
        ("model", 3, "scripted/model"),
    ]
    assert all(": ok: done memory.search" in e.what for e in told.entries if e.kind == "tool")


def test_a_budget_stop_and_a_follow_up_read_as_what_happened() -> None:
    budget = story("budget_exhausted")
    assert budget.result is not None and budget.result.status == TaskStatus.BUDGET_EXHAUSTED
    assert "status: now paused: a budget is reached, waiting for an extension" in decision_chain(budget)
    assert "openloop extend" in budget.result.next_action
    follow = story("follow_up")
    asked = only(follow.entries, "reply", "WAITING_USER: Which environment")
    answered = only(follow.entries, "signal", "message from U_BOB: staging, please")
    assert asked.at is not None and answered.at is not None
    assert answered.at - asked.at == pytest.approx(timedelta(minutes=10), abs=timedelta(seconds=5))
    assert decision_chain(follow)[-1] == "stop: SUCCESS: answered"


def test_a_coding_task_shows_its_workspace_tests_edit_and_pull_request() -> None:
    told = story("coding_pull_request")
    chain = decision_chain(told)
    tools = [line for line in chain if line.startswith("tool: ")]
    opened = only(told.entries, "tool", "code.open_workspace: ok: opened acme/api-e4eb15 at main")
    assert opened.step == 1
    before = [e.step for e in told.entries if "tests before any change: failed: 1 failing" in e.what]
    assert before == [1, 2]  # the task's own run when the workspace opened, then the model's
    edit = only(told.entries, "tool", "code.edit_file: ok: Edited calc.py")
    assert edit.step == 4 and "the workspace's diff: 1 file(s) changed, +1 −1" in edit.what
    after = only(told.entries, "tool", "code.run_tests: tests after the change: passed")
    assert after.step == 5
    pull = only(told.entries, "tool", "github.create_pull_request: ok: opened draft pull request #1:")
    assert "https://github.test/acme/api-e4eb15/pull/1" in pull.what and pull.who == "cli:local"
    # In order, each after the model step that asked for it; the link after the approval.
    order = [
        "code.open_workspace: ok",
        "tests before any change",
        "code.search: ok",
        "code.edit_file: ok",
        "tests after the change: passed",
        "github.create_pull_request: ok",
    ]
    positions = [next(i for i, line in enumerate(tools) if part in line) for part in order]
    assert positions == sorted(positions), tools
    assert chain.index(next(line for line in chain if "approved by cli:local" in line)) < chain.index(
        next(line for line in chain if "opened draft pull request" in line)
    )
