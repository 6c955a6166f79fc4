"""Sensors are read with `ast`, never run: what a literal declaration gives the compiler, and how a
dynamic one is refused without a line of it executing."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from config.playbooks import compile_playbooks
from config.playbooks.sensor import declared_sensor, sensor

REGISTRY = """\
events:
  Incident:
    fields: {title: str, link: str?}
  Ticket:
    fields: {title: str}
    sensor: linear:new_tickets
"""
TRIAGE = "---\non: Incident\nagent: coder\n---\nLook at {{ event.title }}.\n"
TICKETS = "---\non: Ticket\nagent: coder\n---\nLook at {{ event.title }}.\n"


def _root(tmp_path: Path, sensors: dict[str, str]) -> Path:
    root = tmp_path / "playbooks"
    (root / "triage").mkdir(parents=True)
    (root / "tickets").mkdir()
    (root / "sensors").mkdir()
    (root / "registry.yaml").write_text(REGISTRY)
    (root / "triage/look.md").write_text(TRIAGE)
    (root / "tickets/look.md").write_text(TICKETS)
    for name, text in sensors.items():
        (root / "sensors" / name).write_text(textwrap.dedent(text))
    return root


SENTRY = """\
from config.playbooks.sensor import sensor

@sensor(webhook="/hooks/sentry", emits="Incident")
def sentry_issues(request):
    return {"title": request["title"]}
"""
LINEAR = """\
from config.playbooks import sensor

@sensor(poll="5m", emits="Ticket")
async def new_tickets():
    return None
"""


def test_literal_sensors_are_read_and_give_their_events_a_source(tmp_path: Path) -> None:
    root = _root(tmp_path, {"sentry.py": SENTRY, "linear.py": LINEAR})
    report = compile_playbooks(root, {"coder"})
    assert report.ok, report.errors
    refs = {(s.ref, s.emits, s.webhook, s.poll_seconds) for s in report.sensors}
    assert ("sentry:sentry_issues", "Incident", "/hooks/sentry", None) in refs
    assert ("linear:new_tickets", "Ticket", None, 300.0) in refs
    assert report.events["Incident"].source == "sensor"
    assert report.events["Incident"].match == {"sensors": ["sentry:sentry_issues"]}
    assert report.events["Ticket"].source == "sensor"
    assert report.events["Ticket"].match == {"sensor": "linear:new_tickets"}
    assert not any("nobody produces" in str(w) for w in report.warnings)


def test_a_dynamic_emits_is_refused_and_its_code_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    dynamic = f"""\
    from pathlib import Path
    from config.playbooks.sensor import sensor

    Path({str(marker)!r}).write_text("imported")

    def event_name():
        Path({str(marker)!r}).write_text("called")
        return "Incident"

    @sensor(webhook="/hooks/sentry", emits=event_name())
    def sentry_issues(request):
        return request
    """
    root = _root(tmp_path, {"sentry.py": dynamic})
    report = compile_playbooks(root, {"coder"})
    problems = [str(p) for p in report.errors]
    assert any(
        p.startswith(f"{root}/sensors/sentry.py:10: emits:")
        and "cannot be read without running the code" in p
        for p in problems
    ), problems
    assert not marker.exists()
    # The same file does run when imported: the marker proves the compile never did.
    spec = importlib.util.spec_from_file_location("sentry_probe", root / "sensors/sentry.py")
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert marker.read_text() == "called"


@pytest.mark.parametrize(
    ("source", "line", "field", "words"),
    [
        ('@sensor(webhook="/hooks/x")\ndef f(r): ...\n', 1, "emits", 'add emits="EventName"'),
        (
            '@sensor(webhook="/hooks/x", emits="Nope")\ndef f(r): ...\n',
            1,
            "emits",
            "'Nope', which is not registered",
        ),
        ('NAME = "Incident"\n@sensor(poll="5m", emits=NAME)\ndef f(): ...\n', 2, "emits", "string literal"),
        ('@sensor(emits="Incident")\ndef f(): ...\n', 1, "webhook", "exactly one trigger"),
        ('@sensor(poll="soon", emits="Incident")\ndef f(): ...\n', 1, "poll", "not a duration"),
        ('@sensor(webhook="/sentry", emits="Incident")\ndef f(r): ...\n', 1, "webhook", "/hooks/NAME"),
        (
            "def f(r): ...\nf = sensor(emits='Incident', poll='5m')(f)\n",
            2,
            "sensor",
            "on a top-level function",
        ),
        ("@sensor\ndef f(r): ...\n", 1, "sensor", "declares what it emits"),
        ("def f(:\n", 1, "", "not valid Python"),
    ],
)
def test_sensor_declarations_that_cannot_be_read_are_refused(
    tmp_path: Path, source: str, line: int, field: str, words: str
) -> None:
    header = "from config.playbooks.sensor import sensor\n"
    root = _root(tmp_path, {"bad.py": header + source, "linear.py": LINEAR})
    report = compile_playbooks(root, {"coder"})
    where = f"{root}/sensors/bad.py:{line + 1}:" + (f" {field}:" if field else "")
    assert any(str(p).startswith(where) and words in str(p) for p in report.errors), report.errors


def test_a_registry_sensor_source_must_name_a_sensor_that_emits_it(tmp_path: Path) -> None:
    root = _root(tmp_path, {"linear.py": LINEAR + SENTRY})  # new_tickets: Ticket; sentry_issues: Incident
    (root / "registry.yaml").write_text(REGISTRY.replace("linear:new_tickets", "linear:sentry_issues"))
    problems = [str(p) for p in compile_playbooks(root, {"coder"}).errors]
    assert any(
        p.startswith(f"{root}/registry.yaml:6: events.Ticket.sensor:")
        and "emits 'Incident', not 'Ticket'" in p
        for p in problems
    ), problems
    (root / "registry.yaml").write_text(REGISTRY.replace("linear:new_tickets", "linear:gone"))
    problems = [str(p) for p in compile_playbooks(root, {"coder"}).errors]
    assert any("registry.yaml:6: events.Ticket.sensor: no sensor 'linear:gone'" in p for p in problems), (
        problems
    )


def test_the_decorator_marks_the_function_for_the_runtime() -> None:
    @sensor(poll="1m", emits="Incident")
    def poll_incidents() -> None:
        return None

    spec = declared_sensor(poll_incidents)
    assert spec is not None and (spec.emits, spec.poll_seconds, spec.webhook) == ("Incident", 60.0, None)
    assert declared_sensor(len) is None
    with pytest.raises(ValueError, match="exactly one trigger"):
        sensor(emits="Incident")
