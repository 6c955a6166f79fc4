"""A conditional `emits:` (`{event: X, when: "verdict == fail"}`) compiles into a condition the run
checks, and a wrong one is refused at its line; `playbooks fire` reads `--field` texts as the
event's types; a Loopy project's sensors (`from loopy import sensor`, `loopy.events`, `req.json`)
load and make their events unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from activities.playbooks.sensor_code import load_sensors
from config.playbooks import compile_playbooks
from surfaces.cli.playbook_fire import fire_fields, run_key_for
from workflows.playbook_types import EmitCondition, EventType, FieldKind, TypedField

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds" / "loopy"
EVALUATE = SEEDS / "effective-agents" / "workflows" / "evaluator" / "evaluate.md"


def _evaluator(tmp_path: Path, emits: str) -> Path:
    """The recorded effective-agents project with the evaluator's `emits:` line replaced."""
    root = tmp_path / "project"
    shutil.copytree(SEEDS / "effective-agents", root)
    step = root / "workflows" / "evaluator" / "evaluate.md"
    step.write_text(EVALUATE.read_text().replace("emits: ContentRequested", emits))
    return root


def test_a_conditional_emits_compiles_to_the_condition_the_run_checks(tmp_path: Path) -> None:
    root = _evaluator(tmp_path, 'emits: {event: ContentRequested, when: "verdict == fail"}')
    report = compile_playbooks(root)

    assert report.ok, [str(e) for e in report.errors]
    evaluate = next(p for p in report.playbooks if p.name == "evaluator").step("evaluate")
    assert evaluate.emits == "ContentRequested"
    assert evaluate.emit_when == EmitCondition(name="verdict", value="fail")
    loop = next(str(w) for w in report.warnings if "evaluate.md:7: emits:" in str(w))
    assert "to emit only on a verdict" not in loop  # it has its condition


@pytest.mark.parametrize(
    ("emits", "message"),
    [
        (
            'emits: {event: ContentRequested, when: "verdict == maybe"}',
            "evaluate.md:7: emits.when: when: verdict == maybe: verdict is enum[pass, fail], so compare "
            "it with one of: pass, fail",
        ),
        (
            'emits: {event: ContentRequested, when: "verdikt == fail"}',
            "evaluate.md:7: emits.when: when: verdikt == fail: the step declares no output 'verdikt'; "
            "did you mean 'verdict'? its output: verdict: enum[pass, fail], feedback: str",
        ),
        (
            'emits: {event: ContentRequested, when: "verdict is fail"}',
            "evaluate.md:7: emits.when: 'verdict is fail' is not a condition; write an output field, "
            "== or !=, and a value: verdict == fail",
        ),
        (
            "emits: {event: ContentRequested, if: verdict}",
            "evaluate.md:7: emits.if: write `emits: EventName` or "
            '`emits: {event: EventName, when: "verdict == fail"}`',
        ),
    ],
)
def test_a_wrong_condition_is_refused_at_its_line(tmp_path: Path, emits: str, message: str) -> None:
    errors = [str(e) for e in compile_playbooks(_evaluator(tmp_path, emits)).errors]
    assert len(errors) == 1 and errors[0].endswith(message), errors


def test_a_condition_holds_only_for_its_value() -> None:
    fail = EmitCondition(name="verdict", value="fail")
    not_pass = EmitCondition(name="verdict", value="pass", equals=False)
    flagged = EmitCondition(name="flaky", value="true")

    assert fail.holds({"verdict": "fail"}) and not fail.holds({"verdict": "pass"})
    assert not fail.holds({})  # an optional field left out: no event
    assert not_pass.holds({"verdict": "fail"}) and not not_pass.holds({"verdict": "pass"})
    assert flagged.holds({"flaky": True}) and not flagged.holds({"flaky": False})
    assert str(not_pass) == "verdict != pass"


EVENT = EventType(
    name="Asked",
    fields=(
        TypedField(name="text", kind=FieldKind.STR),
        TypedField(name="count", kind=FieldKind.INT),
        TypedField(name="urgent", kind=FieldKind.BOOL, optional=True),
        TypedField(name="tags", kind=FieldKind.LIST_STR, optional=True),
        TypedField(name="route", kind=FieldKind.ENUM, choices=("a", "b"), optional=True),
    ),
)


def test_fired_fields_are_read_as_the_events_types() -> None:
    fields = fire_fields(EVENT, ["text=a=b", "count=3", "urgent=yes", "tags=x, y", "route=b"])

    assert fields == {"text": "a=b", "count": 3, "urgent": True, "tags": ["x", "y"], "route": "b"}
    assert run_key_for("Asked", fields) == run_key_for("Asked", dict(reversed(fields.items())))
    assert run_key_for("Asked", fields) != run_key_for("Asked", {**fields, "count": 4})


def test_wrong_fired_fields_are_each_named() -> None:
    with pytest.raises(ValueError) as raised:
        fire_fields(EVENT, ["txt=hi", "count=many", "route=c", "urgent"])
    lines = str(raised.value).splitlines()
    assert lines == [
        "--field txt: Asked has no field 'txt' (its fields: text: str, count: int, urgent: bool?, "
        "tags: list[str]?, route: enum[a, b]?)",
        "--field count='many': count is int; invalid literal for int() with base 10: 'many'",
        "--field route='c': route is enum[a, b]?; choose one of a, b",
        "--field 'urgent': write NAME=VALUE",
        "Asked needs --field text=..., --field count=... (its fields: text: str, count: int, urgent: bool?, "
        "tags: list[str]?, route: enum[a, b]?)",
    ]


async def test_loopy_sensors_load_unchanged_and_make_their_events(tmp_path: Path) -> None:
    root = tmp_path / "incidents"
    shutil.copytree(SEEDS / "incidents", root)

    loaded, problems = load_sensors(root)

    assert problems == []
    sensors = {sensor.ref: sensor for sensor in loaded}
    body = {"data": {"issue": {"id": "42", "title": "Boom", "permalink": "https://sentry.test/42"}}}
    made = await sensors["sensors:sentry_issues"].event(body)
    assert made == {"source": "sentry", "issue_id": "42", "title": "Boom", "link": "https://sentry.test/42"}
    assert type(made) is dict
    assert sensors["sensors:sentry_issues"].hook == "sentry"
    assert await sensors["sensors:metric_watch"].event({"polled_at": "now"}) == {"goal_id": "g-123"}
    assert sensors["sensors:metric_watch"].spec.poll_seconds == 300
