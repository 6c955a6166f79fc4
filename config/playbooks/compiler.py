"""`compile_playbooks`: a playbooks folder to validated DAGs, without running anything.

    playbooks/
      registry.yaml              events, agent aliases, defaults (`config.playbooks.registry`)
      <playbook>/<step>.md       one folder per playbook, one file per step (`step_files`)
      sensors/*.py               optional, read with `ast` only (`sensors`)

Every problem is a `ConfigProblem` naming file, line and field, with the fix; errors make the
report fail, warnings (an event nobody produces, one nobody listens to, playbooks that start
each other in a loop, more steps ready at once than a run starts, checks skipped for want of
agents) do not. Only playbooks whose own files and registry entries are free of errors, and
that fit the limits (`config.playbooks.limits`), come out compiled, steps in topological
order with the entry first.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from config.agent import _NAME as PLAYBOOK_NAME  # playbooks are named like agents
from config.playbooks.agents import AgentWrites
from config.playbooks.emit_loops import emit_loops
from config.playbooks.graph import build_graph
from config.playbooks.limits import too_large, too_many_steps, too_wide
from config.playbooks.registry import REGISTRY_FILE, Registry, read_registry
from config.playbooks.sensors import SENSORS_DIR, SensorDecl, read_sensors
from config.playbooks.step_checks import CRON_FIELDS, Known, check_step, resolve_agent
from config.playbooks.step_files import StepFile, read_step
from config.problems import ConfigProblem
from workflows.playbook_types import CompiledPlaybook, EventType, PlaybookStep, TriggerKind, TypedField

__all__ = ["CompileReport", "compile_playbooks"]


@dataclass
class CompileReport:
    root: Path
    playbooks: list[CompiledPlaybook] = field(default_factory=list)
    errors: list[ConfigProblem] = field(default_factory=list)
    warnings: list[ConfigProblem] = field(default_factory=list)
    events: dict[str, EventType] = field(default_factory=dict)  # the registry's, sources filled in
    sensors: list[SensorDecl] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors


def compile_playbooks(
    root: Path, known_agents: set[str] | None = None, *, agents: Mapping[str, AgentWrites] | None = None
) -> CompileReport:
    """Compile every playbook under `root`.

    `known_agents`: the agents that exist (None: agent names are not checked). `agents`: what
    each agent's tools write (see `config.playbooks.agents.agent_writes`); without it a write
    reachable without an approval is not checked. Either skipped check is a warning.
    """
    report = CompileReport(root)
    registry, problems = read_registry(root)
    sensors, sensor_problems = read_sensors(root)
    report.sensors, report.aliases = sensors, dict(registry.aliases)
    names = set(known_agents) if known_agents is not None else (set(agents) if agents is not None else None)
    known = Known(frozenset(names) if names is not None else None, agents)
    report.errors += problems + sensor_problems + _sensor_contracts(registry, sensors)
    report.errors += _alias_targets(registry, known)
    folders = _playbook_folders(root, report)
    emitted: dict[str, list[str]] = {}
    listened: set[str] = set()
    read: dict[str, dict[str, StepFile]] = {}
    for folder in folders:
        playbook, errors, steps = _compile_one(folder, root, registry, known)
        report.errors += errors
        read[folder.name] = steps
        if playbook is not None:
            report.playbooks.append(playbook)
            wide = too_wide(playbook, folder)
            if wide is not None:
                report.warnings.append(wide)
        for step in steps.values():
            if step.emits:
                emitted.setdefault(step.emits, []).append(f"{folder.name}/{step.name}")
            if step.trigger is not None and step.trigger.event:
                listened.add(step.trigger.event)
    report.events = _events_with_sources(registry, sensors, emitted)
    report.warnings += _warnings(registry, report.events, listened, known, root) + emit_loops(read)
    report.errors.sort(key=lambda p: (p.file, p.line or 0, p.field))
    return report


def _playbook_folders(root: Path, report: CompileReport) -> list[Path]:
    if not root.is_dir():
        report.errors.append(
            ConfigProblem(str(root), None, "", "no playbooks folder here; create it or pass --dir")
        )
        return []
    for stray in sorted(root.glob("*.md")):
        if stray.name.lower() != "readme.md":
            message = f"a step belongs in a playbook's folder: move it to {root / 'NAME' / stray.name}"
            report.errors.append(ConfigProblem(str(stray), 1, "", message))
    return [
        folder
        for folder in sorted(root.iterdir())
        if folder.is_dir() and folder.name != SENSORS_DIR and not folder.name.startswith((".", "_"))
    ]


def _compile_one(
    folder: Path, root: Path, registry: Registry, known: Known
) -> tuple[CompiledPlaybook | None, list[ConfigProblem], dict[str, StepFile]]:
    problems: list[ConfigProblem] = []
    steps: dict[str, StepFile] = {}
    texts: list[str] = []
    paths = [path for path in sorted(folder.glob("*.md")) if path.name.lower() != "readme.md"]
    too_many = too_many_steps(folder, len(paths))
    if too_many is not None:  # refused before a file is read
        return None, [too_many], steps
    for path in paths:
        step, found = read_step(path, str(path), registry)
        problems += found
        if step is not None:
            steps[step.name] = step
            texts.append(f"{path.relative_to(root).as_posix()}\n{path.read_text(encoding='utf-8')}")
    if not steps and not problems:
        return None, [], steps  # a folder without steps is not a playbook
    if not PLAYBOOK_NAME.match(folder.name):
        message = f"{folder.name!r}: name a playbook folder with 1-63 lowercase letters, digits or dashes"
        problems.append(ConfigProblem(str(folder), None, "", message))
    graph, found = build_graph(folder.name, steps)
    problems += found
    entry = steps.get(graph.entry) if graph.entry else None
    event_fields: tuple[TypedField, ...] | None = None
    if entry is not None and entry.trigger is not None:
        trigger = entry.trigger
        event_fields = (
            CRON_FIELDS if trigger.kind is TriggerKind.CRON else registry.events[trigger.event or ""].fields
        )
    for step in steps.values():
        problems += check_step(step, steps, graph, registry, known, event_fields)
    if problems or entry is None or entry.trigger is None:
        return None, problems, steps
    compiled = [_compiled_step(steps[name], root, registry) for name in graph.order]
    playbook = CompiledPlaybook(
        name=folder.name, trigger=entry.trigger, steps=tuple(compiled), content_hash=""
    )
    playbook = playbook.model_copy(update={"content_hash": _content_hash(playbook, texts, registry)})
    too_big = too_large(playbook, folder)
    return (None, [too_big], steps) if too_big is not None else (playbook, [], steps)


def _compiled_step(step: StepFile, root: Path, registry: Registry) -> PlaybookStep:
    budget = step.budget_usd if step.budget_usd is not None else registry.defaults.budget_usd
    return PlaybookStep(
        name=step.name,
        agent=resolve_agent(step, registry) or "",
        instructions=step.body.strip() + "\n",
        after=step.after,
        output=step.output,
        emits=step.emits,
        budget_usd=budget,
        approval=step.approval or registry.defaults.approval,
        source=Path(step.source).relative_to(root).as_posix(),
    )


def _content_hash(playbook: CompiledPlaybook, texts: list[str], registry: Registry) -> str:
    """Of the files as written and of what the compile made of them, registry entries included:
    a changed event, alias or default gives a new hash too."""
    used = {playbook.trigger.event, *(step.emits for step in playbook.steps)} - {None}
    events = [registry.events[name].model_dump(mode="json") for name in sorted(n for n in used if n)]
    digest = hashlib.sha256()
    for text in sorted(texts):
        digest.update(text.encode())
    digest.update(json.dumps([playbook.model_dump(mode="json"), events], sort_keys=True).encode())
    return digest.hexdigest()


def _sensor_contracts(registry: Registry, sensors: list[SensorDecl]) -> list[ConfigProblem]:
    problems = []
    for decl in sensors:
        if decl.emits not in registry.events:
            known = ", ".join(sorted(registry.events)) or "none"
            message = (
                f"emits {decl.emits!r}, which is not registered; add it under `events:` in "
                f"{registry.source} (known: {known})"
            )
            problems.append(ConfigProblem(decl.file, decl.line, "emits", message))
    by_ref = {decl.ref: decl for decl in sensors}
    for event, ref in registry.sensor_refs.items():
        short = ref.removeprefix(f"{SENSORS_DIR}.")
        found_decl = by_ref.get(short)
        at = ("events", event, "sensor")
        if found_decl is None:
            found = ", ".join(sorted(by_ref)) or f"none in {SENSORS_DIR}/"
            message = (
                f"no sensor {ref!r}; write module:function of an @sensor in {SENSORS_DIR}/ (found: {found})"
            )
            problems.append(
                ConfigProblem(registry.source, registry.line(at), "events." + event + ".sensor", message)
            )
        elif found_decl.emits != event:
            where = f"{found_decl.file}:{found_decl.line}"
            message = f"sensor {ref!r} emits {found_decl.emits!r}, not {event!r} ({where}); make them agree"
            problems.append(
                ConfigProblem(registry.source, registry.line(at), "events." + event + ".sensor", message)
            )
    return problems


def _alias_targets(registry: Registry, known: Known) -> list[ConfigProblem]:
    if known.names is None:
        return []
    return [
        ConfigProblem(
            registry.source,
            registry.line(("agents", alias)),
            f"agents.{alias}",
            f"alias {alias!r} names agent {name!r}, which is not applied; apply it "
            f"(openloop agents apply -f FILE) or name one of: {', '.join(sorted(known.names)) or 'none'}",
        )
        for alias, name in registry.aliases.items()
        if name not in known.names
    ]


def _events_with_sources(
    registry: Registry, sensors: list[SensorDecl], emitted: dict[str, list[str]]
) -> dict[str, EventType]:
    """The registry's events; one without a source of its own comes from its sensors or steps."""
    events = {}
    for name, event in registry.events.items():
        refs = [decl.ref for decl in sensors if decl.emits == name]
        if not event.source and refs:
            event = event.model_copy(update={"source": "sensor", "match": {"sensors": refs}})
        elif not event.source and name in emitted:
            event = event.model_copy(update={"source": "playbook", "match": {"steps": emitted[name]}})
        events[name] = event
    return events


def _warnings(
    registry: Registry, events: dict[str, EventType], listened: set[str], known: Known, root: Path
) -> list[ConfigProblem]:
    warnings = []
    for name, event in events.items():
        at = registry.line(("events", name))
        if not event.source:
            message = (
                f"nobody produces {name}: it has no source, no sensor emits it and no step `emits:` it; "
                "runs start only when it is fired by hand"
            )
            warnings.append(ConfigProblem(registry.source, at, f"events.{name}", message))
        if name not in listened:
            message = f"no playbook starts on {name}; a step with `on: {name}` would"
            warnings.append(ConfigProblem(registry.source, at, f"events.{name}", message))
    if known.names is None:
        message = (
            "agents were not checked (none known): pass --agents FILES, "
            "or --applied to check against the agents on the stack"
        )
        warnings.append(ConfigProblem(str(root / REGISTRY_FILE), None, "agents", message))
    elif known.writes is None:
        message = "write tools reachable without an approval were not checked: agents' tools are not known"
        warnings.append(ConfigProblem(str(root / REGISTRY_FILE), None, "agents", message))
    return warnings
