"""One step file, `playbooks/<playbook>/<step>.md`: YAML frontmatter between `---` lines, then
the step's instructions in prose.

    ---
    on: cron("0 3 * * *", tz="Europe/Berlin")   # or a registered event; only the entry step
    agent: scanner                               # an alias from registry.yaml or an agent's name
    output: {critical: int, summary: str}
    budget: $0.50
    approval: required                           # every write of this step waits for a person
    ---
    Scan the dependencies ...

`on:` may also name one of Loopy's built-in GitHub events, `on: Github.PullRequestMerged`, which
needs no registry entry (`config.playbooks.github_builtins`); Loopy's field-filtered trigger
(`on: Event(field="v")`) and a list of emitted events are refused with what to write instead.
Other steps say `after: scan` (or `after: [a, b]`) instead of `on:`, and any step may say
`emits: SomeEvent`, or `emits: {event: SomeEvent, when: "verdict == fail"}` to publish it only
when an output field has (`!=`: has not) a value. `budget:` may also be Loopy's
`{wall_clock: 20, spend: {usd: 4}}` (`config.playbooks.budgets`). This module reads one file
and checks what the file alone and the registry can tell; the playbook's graph and references
are checked in `config.playbooks.graph`.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.playbooks.budgets import read_budget
from config.playbooks.github_builtins import BUILTIN_PREFIXES, builtin_event, builtin_refused
from config.playbooks.registry import APPROVALS, EVENT_NAME, Registry, unknown_key
from config.playbooks.typed_fields import read_field_map
from config.playbooks.yaml_text import YamlDoc, load_yaml
from config.problems import ConfigProblem
from workflows.playbook_types import EmitCondition, Trigger, TriggerKind, TypedField

__all__ = ["STEP_KEYS", "StepFile", "read_step"]

STEP_KEYS = ("on", "after", "agent", "output", "emits", "budget", "approval", "description")
STEP_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
RESERVED_STEPS = ("event", "steps")  # the first word of a reference
_WHEN = re.compile(r"""^\s*([a-z_][a-z0-9_]*)\s*(==|!=)\s*(["']?)([A-Za-z0-9_.-]+)\3\s*$""")
EMITS_HINT = 'write `emits: EventName` or `emits: {event: EventName, when: "verdict == fail"}`'
# Loopy writes the zone bare (`tz=UTC`); quoted is read too.
_CRON = re.compile(r"""^cron\(\s*(["'])(?P<expr>.*?)\1\s*(?:,\s*tz\s*=\s*(["']?)(?P<tz>[^"')]*?)\3\s*)?\)$""")
FILTERED_HINT = (
    "a trigger filtered by fields is not read here; name the event alone and filter where it is "
    "made: in its sensor (return None for the rest), with `emits: {event: X, when: ...}`, or a "
    "registered event with a github source and the filter, e.g. github: {event: pull_request, "
    "action: opened, repo: octocat/Hello-World}"
)
CRON_HINT = 'write cron("0 3 * * *") or cron("0 3 * * *", tz="Europe/Berlin"), the expression quoted'


@dataclass
class StepFile:
    name: str  # the file's stem
    source: str  # the file as messages name it
    doc: YamlDoc
    body: str
    body_line: int  # the file's line where the prose starts
    trigger: Trigger | None = None
    after: tuple[str, ...] = ()
    agent: str | None = None  # as written (an alias or a name)
    output: tuple[TypedField, ...] = ()
    emits: str | None = None
    emit_when: EmitCondition | None = None
    budget_usd: float | None = None
    approval: str | None = None  # None: the registry's default
    warnings: list[ConfigProblem] = field(default_factory=list)  # what means nothing here
    text: str = ""  # the whole file as read, for the content hash

    def line(self, key: str) -> int | None:
        return self.doc.line((key,))


def _split(text: str, source: str) -> tuple[str, str, int] | ConfigProblem:
    """(frontmatter, body, the body's first line) of a step file."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return ConfigProblem(source, 1, "", "a step file starts with a '---' line, then YAML frontmatter")
    end = next((i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---"), None)
    if end is None:
        return ConfigProblem(source, 1, "", "the frontmatter has no closing '---' line; add one after it")
    return "".join(lines[1:end]), "".join(lines[end + 1 :]), end + 2


def read_step(path: Path, source: str, registry: Registry) -> tuple[StepFile | None, list[ConfigProblem]]:
    """The step in `path` (named `source` in messages) and every problem the file shows."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [ConfigProblem(source, None, "", f"cannot read: {exc}")]
    split = _split(text, source)
    if isinstance(split, ConfigProblem):
        return None, [split]
    front, body, body_line = split
    doc, problems = load_yaml(front, source, first_line=2)
    if doc is None:
        return None, problems
    step = StepFile(path.stem, source, doc, body, body_line, text=text)
    if not STEP_NAME.match(step.name) or step.name in RESERVED_STEPS:
        message = (
            f"{path.name!r}: name a step file with lowercase letters, digits, - and _ (not event or steps)"
        )
        problems.append(ConfigProblem(source, 1, "", message))
    data = doc.data
    problems += [
        doc.problem((str(key),), unknown_key(key, STEP_KEYS)) for key in data if key not in STEP_KEYS
    ]
    if "on" in data:
        step.trigger, found = _trigger(doc, data["on"], registry)
        problems += found
    if "after" in data:
        after = data["after"]
        names = [after] if isinstance(after, str) else after
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
            problems.append(
                doc.problem(("after",), "name the step(s) this one runs after: `after: a` or `after: [a, b]`")
            )
        else:
            step.after = tuple(dict.fromkeys(names))
    if "agent" in data:
        if isinstance(data["agent"], str) and data["agent"]:
            step.agent = data["agent"]
        else:
            problems.append(doc.problem(("agent",), "name an agent or an alias from registry.yaml"))
    if "output" in data:
        step.output, found = read_field_map(doc, ("output",), data["output"])
        problems += found
    if "emits" in data:
        step.emits, step.emit_when = _emits(doc, data["emits"], registry, problems)
    if data.get("budget") is not None:
        step.budget_usd, found, step.warnings = read_budget(doc, ("budget",), data["budget"])
        problems += found
    if "approval" in data:
        if data["approval"] in APPROVALS:
            step.approval = data["approval"]
        else:
            message = f"{data['approval']!r}: allowed values are {', '.join(APPROVALS)}"
            problems.append(doc.problem(("approval",), message))
    return step, problems


def _event(
    doc: YamlDoc, key: str, value: Any, registry: Registry, problems: list[ConfigProblem]
) -> str | None:
    if isinstance(value, str) and value.startswith(BUILTIN_PREFIXES):
        return _builtin(doc, key, value, registry, problems)
    if not isinstance(value, str) or not EVENT_NAME.match(value):
        problems.append(doc.problem((key,), f"{value!r} is not an event name; name one from registry.yaml"))
        return None
    if value not in registry.events:
        known = ", ".join(sorted(registry.events)) or f"none: {registry.source} declares no events"
        message = (
            f"unknown event {value!r}; register it under `events:` in {registry.source} (known: {known})"
        )
        problems.append(doc.problem((key,), message))
        return None
    return value


def _builtin(
    doc: YamlDoc, key: str, value: str, registry: Registry, problems: list[ConfigProblem]
) -> str | None:
    """Loopy's `on: Github.PullRequestMerged`: registered as the step names it."""
    event = builtin_event(value) if key == "on" else None
    if event is None:
        problems.append(doc.problem((key,), builtin_refused(value, key)))
        return None
    registry.events.setdefault(value, event)
    return value


def _emits(
    doc: YamlDoc, value: Any, registry: Registry, problems: list[ConfigProblem]
) -> tuple[str | None, EmitCondition | None]:
    if isinstance(value, list):  # Loopy's `emits: [A, B]`
        message = "a step emits one event here; emit the other from a step `after:` this one"
        problems.append(doc.problem(("emits",), message))
        return None, None
    if not isinstance(value, dict):
        return _event(doc, "emits", value, registry, problems), None
    wrong = [key for key in value if key not in ("event", "when")]
    if wrong or "event" not in value:
        problems.append(doc.problem(("emits", *map(str, wrong[:1])), EMITS_HINT))
        return None, None
    event = _event(doc, "emits", value["event"], registry, problems)
    when = value.get("when")
    if when is None:
        return event, None
    match = _WHEN.match(str(when)) if isinstance(when, str) else None
    if match is None:
        message = (
            f"{when!r} is not a condition; write an output field, == or !=, and a value: verdict == fail"
        )
        problems.append(doc.problem(("emits", "when"), message))
        return event, None
    return event, EmitCondition(name=match.group(1), value=match.group(4), equals=match.group(2) == "==")


def _trigger(doc: YamlDoc, value: Any, registry: Registry) -> tuple[Trigger | None, list[ConfigProblem]]:
    if not isinstance(value, str):
        return None, [doc.problem(("on",), f"name one registered event, or {CRON_HINT}")]
    if value.startswith("cron"):
        return _cron(doc, value)
    if "(" in value:  # Loopy's `Github.PullRequestOpened(repo="a/b")`
        return None, [doc.problem(("on",), FILTERED_HINT)]
    problems: list[ConfigProblem] = []
    event = _event(doc, "on", value, registry, problems)
    return (Trigger(kind=TriggerKind.EVENT, event=event) if event else None), problems


def _cron(doc: YamlDoc, value: str) -> tuple[Trigger | None, list[ConfigProblem]]:
    from croniter import croniter  # only the compiler needs it

    match = _CRON.match(value.strip())
    if match is None:
        return None, [doc.problem(("on",), f"{value!r} is not a cron trigger; {CRON_HINT}")]
    expression, timezone = match.group("expr").strip(), match.group("tz") or "UTC"
    problems = []
    if len(expression.split()) != 5 or not croniter.is_valid(expression):
        message = (
            f"{expression!r} is not a cron expression; write five fields: minute hour day-of-month "
            'month day-of-week, e.g. "0 3 * * *" (every day at 03:00)'
        )
        problems.append(doc.problem(("on",), message))
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        message = f"{timezone!r} is not a time zone; write an IANA name such as Europe/Berlin or UTC"
        problems.append(doc.problem(("on",), message))
    if problems:
        return None, problems
    return Trigger(kind=TriggerKind.CRON, cron=expression, timezone=timezone), []
