"""Playbooks refuse what cannot run and bound what can: sensors the static reading cannot read are
refused by the compiler and never served; steps, compiled size and emit loops have limits or
warnings; graph checks stay linear on a long chain."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from fastapi import FastAPI

from activities.playbooks.sensor_code import PLAYBOOKS_DIR_ENV, load_sensors
from config.playbooks import compile_playbooks
from config.playbooks.graph import build_graph
from config.playbooks.step_files import StepFile
from config.playbooks.yaml_text import YamlDoc
from surfaces import hooks
from workflows.playbook_calls import MAX_EMIT_DEPTH
from workflows.playbook_limits import MAX_COMPILED_BYTES, MAX_PARALLEL_STEPS, MAX_STEPS_PER_PLAYBOOK

REGISTRY = "events:\n  Incident:\n    fields: {title: str}\n"
ENTRY = "---\non: Incident\nagent: coder\n---\nLook at {{ event.title }}.\n"


def _root(tmp_path: Path, sensors: dict[str, str] | None = None) -> Path:
    root = tmp_path / "playbooks"
    (root / "triage").mkdir(parents=True)
    (root / "registry.yaml").write_text(REGISTRY)
    (root / "triage" / "look.md").write_text(ENTRY)
    if sensors:
        (root / "sensors").mkdir()
        for name, text in sensors.items():
            (root / "sensors" / name).write_text(text)
    return root


def _refused_by_both(root: Path, where: str, words: str) -> None:
    compiled = [str(problem) for problem in compile_playbooks(root, {"coder"}).errors]
    assert any(p.startswith(where) and words in p for p in compiled), compiled
    served, problems = load_sensors(root)
    assert served == [], served
    assert any(p.startswith(where) and words in p and "not loaded" in p for p in problems), problems


def test_an_aliased_sensor_decorator_is_refused_by_the_compiler_and_the_server(tmp_path: Path) -> None:
    ran = tmp_path / "ran.txt"
    aliased = (
        "from pathlib import Path\n"
        "from config.playbooks.sensor import sensor as mark\n"
        f"Path({str(ran)!r}).write_text('imported')\n\n"
        '@mark(webhook="/hooks/sentry", emits="Incident")\n'
        "def issues(request):\n    return request\n"
    )
    root = _root(tmp_path, {"sentry.py": aliased})
    _refused_by_both(root, f"{root}/sensors/sentry.py:2: sensor:", "imported as 'mark'")
    assert not ran.exists()  # neither the compiler nor the server ran the file


def test_the_server_logs_each_sensor_it_does_not_load_and_serves_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    aliased = (
        "from config.playbooks.sensor import sensor as mark\n\n"
        '@mark(webhook="/hooks/sentry", emits="Incident")\n'
        "def issues(request):\n    return request\n"
    )
    root = _root(tmp_path, {"sentry.py": aliased})
    monkeypatch.setenv(PLAYBOOKS_DIR_ENV, str(root))
    app = FastAPI()
    with caplog.at_level(logging.ERROR, logger="openloop.hooks"):
        hooks.register(app)
    assert app.state.sensors == []
    assert any(
        r.getMessage().startswith(f"sensor not loaded: {root}/sensors/sentry.py:1: sensor:")
        and "imported as 'mark'" in r.getMessage()
        for r in caplog.records
    ), caplog.records


def test_a_sensor_reached_through_call_with_a_built_event_is_refused_by_both(tmp_path: Path) -> None:
    dunder = (
        "from config.playbooks.sensor import sensor\n\n"
        '@sensor.__call__(webhook="/hooks/sentry", emits="Un" + "registered")\n'
        "def issues(request):\n    return request\n"
    )
    root = _root(tmp_path, {"sentry.py": dunder})
    _refused_by_both(root, f"{root}/sensors/sentry.py:3: sensor:", "used as a value")


def test_a_non_literal_emits_is_refused_by_both(tmp_path: Path) -> None:
    built = (
        "from config.playbooks.sensor import sensor\n\n"
        '@sensor(webhook="/hooks/sentry", emits="Inci" + "dent")\n'
        "def issues(request):\n    return request\n"
    )
    root = _root(tmp_path, {"sentry.py": built})
    _refused_by_both(root, f"{root}/sensors/sentry.py:3: emits:", "cannot be read without running the code")


def test_the_server_serves_the_reading_and_nothing_marked_only_at_run_time(tmp_path: Path) -> None:
    text = (
        "from config.playbooks.sensor import SensorSpec, sensor\n\n"
        '@sensor(webhook="/hooks/sentry", emits="Incident")\n'
        "def issues(request):\n    return {'title': request['title']}\n\n"
        "def hidden(request):\n    return request\n\n"
        "setattr(hidden, '__openloop_' + 'sensor__', SensorSpec('Incident', '/hooks/other'))\n"
    )
    root = _root(tmp_path, {"sentry.py": text})
    report = compile_playbooks(root, {"coder"})
    assert report.ok, report.errors
    served, problems = load_sensors(root)
    assert [(s.ref, s.spec.emits, s.spec.webhook) for s in served] == [
        (d.ref, d.emits, d.webhook) for d in report.sensors
    ]
    assert any("hidden is marked as a sensor only at run time" in p and "not served" in p for p in problems)


def _chain(root: Path, length: int, folder: str = "chain") -> Path:
    steps = root / folder
    steps.mkdir(parents=True)
    (steps / "s00000.md").write_text(ENTRY.replace("agent:", "output: {title: str}\nagent:"))
    for i in range(1, length):
        after = f"s{i - 1:05d}"
        front = f"after: {after}\nagent: coder\noutput: {{title: str}}"
        (steps / f"s{i:05d}.md").write_text(f"---\n{front}\n---\nAfter {{{{ {after}.title }}}}.\n")
    return steps


def test_a_ten_thousand_step_chain_is_refused_by_the_step_limit_before_a_file_is_read(tmp_path: Path) -> None:
    root = _root(tmp_path)
    steps = _chain(root, 10_000)
    (steps / "s05000.md").write_text("---\nafter: [unclosed\n---\n")  # never read, so never reported
    started = time.monotonic()
    report = compile_playbooks(root, {"coder"})
    assert time.monotonic() - started < 30  # generous: the refusal counts files, reads none
    assert [str(p) for p in report.errors] == [
        f"{steps}: steps: 10000 step files: a playbook has at most {MAX_STEPS_PER_PLAYBOOK} steps (each is "
        "a child agent task); split it into playbooks that start each other with `emits:`"
    ]
    assert [playbook.name for playbook in report.playbooks] == ["triage"]  # the other one compiles


def test_a_chain_at_the_step_limit_compiles_with_every_reference_checked(tmp_path: Path) -> None:
    root = tmp_path / "playbooks"
    root.mkdir()
    (root / "registry.yaml").write_text(REGISTRY)
    steps = _chain(root, MAX_STEPS_PER_PLAYBOOK)
    report = compile_playbooks(root, {"coder"})
    assert report.ok, report.errors[:3]
    [playbook] = report.playbooks
    assert [step.name for step in playbook.steps] == [f"s{i:05d}" for i in range(MAX_STEPS_PER_PLAYBOOK)]
    (steps / "s00100.md").write_text("---\nafter: s00099\nagent: coder\n---\nSee {{ s00150.title }}.\n")
    problems = [str(p) for p in compile_playbooks(root, {"coder"}).errors]
    assert any("step 's00150' is not upstream of 's00100'" in p for p in problems), problems


def _step(name: str, after: tuple[str, ...]) -> StepFile:
    data = {"after": list(after)} if after else {"on": "Incident"}
    return StepFile(name, f"{name}.md", YamlDoc(f"{name}.md", None, data, 1), "", 3, after=after)


def test_the_graph_of_a_long_chain_is_built_without_ancestor_sets_or_recursion() -> None:
    # Names that sort tail first: a recursive walk from the tail goes 5,000 calls deep, and a
    # by-name sweep places one step per pass; kept ancestor sets would hold 12.5 million names.
    length = 5_000
    names = [f"z{length - i:05d}" for i in range(length)]
    steps = {name: _step(name, (names[i - 1],) if i else ()) for i, name in enumerate(names)}
    graph, problems = build_graph("long", steps)
    assert problems == []
    assert graph.order == names
    assert graph.is_upstream(names[0], names[-1]) and not graph.is_upstream(names[-1], names[0])
    assert not hasattr(graph, "upstream")


def test_a_compiled_playbook_over_the_payload_margin_is_refused_naming_the_longest_step(
    tmp_path: Path,
) -> None:
    root = _root(tmp_path)
    prose = "Check the logs carefully. " * (MAX_COMPILED_BYTES // 26 // 2 + 1000)
    (root / "triage" / "read.md").write_text(f"---\nafter: look\nagent: coder\n---\n{prose}\n")
    (root / "triage" / "write.md").write_text(f"---\nafter: read\nagent: coder\n---\n{prose}\n")
    problems = [str(p) for p in compile_playbooks(root, {"coder"}).errors]
    assert len(problems) == 1 and problems[0].startswith(f"{root / 'triage'}: compiled, the playbook is "), (
        problems
    )
    assert "a run can carry" in problems[0] and "the longest: triage/" in problems[0]


def test_more_parallel_steps_than_a_run_starts_at_once_is_a_warning(tmp_path: Path) -> None:
    root = _root(tmp_path)
    width = MAX_PARALLEL_STEPS + 5
    for i in range(width):
        (root / "triage" / f"part{i:02d}.md").write_text("---\nafter: look\nagent: coder\n---\nPart.\n")
    report = compile_playbooks(root, {"coder"})
    assert report.ok, report.errors
    assert any(
        str(w).startswith(f"{root / 'triage'}: after: {width} steps, 1 step(s) from the entry, can be ready")
        and f"at most {MAX_PARALLEL_STEPS} child tasks" in str(w)
        for w in report.warnings
    ), report.warnings


def test_playbooks_that_start_each_other_are_warned_with_the_loop_path(tmp_path: Path) -> None:
    root = tmp_path / "playbooks"
    for folder in ("alpha", "beta"):
        (root / folder).mkdir(parents=True)
    (root / "registry.yaml").write_text(
        "events:\n  X:\n    fields: {note: str}\n  Y:\n    fields: {note: str}\n"
    )
    (root / "alpha" / "start.md").write_text(
        "---\non: Y\nagent: coder\noutput: {note: str}\nemits: X\n---\nGo.\n"
    )
    (root / "beta" / "answer.md").write_text(
        "---\non: X\nagent: coder\noutput: {note: str}\nemits: Y\n---\nGo.\n"
    )
    report = compile_playbooks(root, {"coder"})
    assert report.ok, report.errors
    loops = [str(w) for w in report.warnings if "in a loop" in str(w)]
    assert loops == [
        f"{root / 'alpha' / 'start.md'}:5: emits: playbooks start each other in a loop: alpha → beta → alpha "
        "(alpha/start emits X, which starts beta; beta/answer emits Y, which starts alpha); every event "
        f"starts the next run until the chain stops at depth {MAX_EMIT_DEPTH}; make one of them not emit, "
        "or start on another event"
    ]


def test_a_playbook_emitting_its_own_trigger_is_warned_and_a_chain_is_not(tmp_path: Path) -> None:
    root = _root(tmp_path)
    (root / "registry.yaml").write_text(REGISTRY + "  Done:\n    fields: {title: str}\n")
    (root / "triage" / "look.md").write_text(
        ENTRY.replace("agent:", "output: {title: str}\nemits: Incident\nagent:")
    )
    loops = [str(w) for w in compile_playbooks(root, {"coder"}).warnings if "in a loop" in str(w)]
    assert len(loops) == 1 and "triage → triage (triage/look emits Incident, which starts triage)" in loops[0]
    (root / "triage" / "look.md").write_text(
        ENTRY.replace("agent:", "output: {title: str}\nemits: Done\nagent:")
    )
    assert not [w for w in compile_playbooks(root, {"coder"}).warnings if "in a loop" in str(w)]
