"""`compile_playbooks`: a playbooks folder to validated DAGs, without running anything.

    playbooks/
      registry.yaml              events, agent aliases, defaults (`config.playbooks.registry`)
      <playbook>/<step>.md       one folder per playbook, one file per step (`step_files`)
      sensors/*.py               optional, read with `ast` only (`sensors`)

or a Loopy project as written (`config.playbooks.project`): `registry.yml`,
`workflows/<name>/<step>.md`, `skills/` and the registry's own agents, which come out as
`agent_configs` and `skills` for `openloop playbooks apply` to apply with the playbooks.

Every problem is a `ConfigProblem` naming file, line and field, with the fix; errors make the
report fail, warnings (an event nobody produces, one nobody listens to, playbooks that start
each other in a loop, more steps ready at once than a run starts, checks skipped for want of
agents, a sensor that yields its events, what a Loopy file says that means nothing here) do
not. A folder without a single step is an error saying what was found. Only playbooks whose
own files and registry entries are free of errors, and that fit the limits
(`config.playbooks.limits`), come out compiled, steps in topological order with the entry first.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from config.agent import _NAME as PLAYBOOK_NAME  # playbooks are named like agents
from config.agent import AgentConfig
from config.playbooks.agents import AgentWrites
from config.playbooks.emit_loops import emit_loops
from config.playbooks.graph import build_graph
from config.playbooks.limits import too_large, too_many_steps, too_wide
from config.playbooks.project import nothing_found, playbook_folders
from config.playbooks.project_skills import agent_configs, read_project_skills
from config.playbooks.registry import Registry, read_registry
from config.playbooks.registry_checks import (
    alias_targets,
    events_with_sources,
    registry_warnings,
    sensor_contracts,
)
from config.playbooks.sensor_yields import yielding_sensors
from config.playbooks.sensors import SensorDecl, read_sensors
from config.playbooks.step_checks import (
    CRON_FIELDS,
    Known,
    asked_fields,
    carried_fields,
    check_step,
    resolve_agent,
)
from config.playbooks.step_files import StepFile, read_step
from config.problems import ConfigProblem
from config.skills import Skill
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
    agent_configs: list[AgentConfig] = field(default_factory=list)  # the registry's own agents
    skills: list[Skill] = field(default_factory=list)  # the project's `skills/`

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
    if not root.is_dir():
        report.errors.append(
            ConfigProblem(str(root), None, "", "no playbooks folder here; create it or pass --dir")
        )
        return report
    registry, problems = read_registry(root)
    sensors, sensor_problems = read_sensors(root)
    project = read_project_skills(root)
    report.sensors, report.aliases, report.skills = sensors, dict(registry.aliases), project.skills
    report.agent_configs, skill_warnings = agent_configs(registry.agents, project.skills, registry.source)
    known = _known(registry, known_agents, agents)
    report.errors += problems + project.problems + sensor_problems + sensor_contracts(registry, sensors)
    report.errors += alias_targets(registry, known)
    report.warnings += registry.warnings + skill_warnings + yielding_sensors(sensors)
    folders, strays = playbook_folders(root)
    report.errors += strays
    emitted: dict[str, list[str]] = {}
    listened: set[str] = set()
    read: dict[str, dict[str, StepFile]] = {}
    for folder in folders:
        with _cycles_collected_after():
            playbook, errors, steps = _compile_one(folder, root, registry, known)
        report.errors += errors
        read[folder.name] = steps
        if playbook is not None:
            report.playbooks.append(playbook)
            wide = too_wide(playbook, folder)
            if wide is not None:
                report.warnings.append(wide)
        for step in steps.values():
            report.warnings += step.warnings
            if step.emits:
                emitted.setdefault(step.emits, []).append(f"{folder.name}/{step.name}")
            if step.trigger is not None and step.trigger.event:
                listened.add(step.trigger.event)
    if not any(read.values()) and not report.errors:
        empty = nothing_found(root, folders, registry.doc is not None)
        (report.warnings if empty.field == "registry" else report.errors).append(empty)
    report.events = events_with_sources(registry, sensors, emitted)
    report.warnings += registry_warnings(registry, report.events, listened, known, root) + emit_loops(read)
    report.errors.sort(key=lambda p: (p.file, p.line or 0, p.field))
    report.warnings.sort(key=lambda p: (p.file, p.line or 0))
    return report


@contextmanager
def _cycles_collected_after() -> Iterator[None]:
    """The cycle collector off while a playbook compiles. The compile keeps nearly all it makes
    (every file's YAML nodes, for the lines its problems name) until it ends, so each full
    collection as the heap grows walks everything read so far again: a quarter of a 10,000-step
    compile. Reference counting still frees what is dropped; cycles wait for the next collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _known(
    registry: Registry, known_agents: set[str] | None, agents: Mapping[str, AgentWrites] | None
) -> Known:
    """The agents steps may name: the caller's, and the registry's own (which write nothing,
    having no tools). A registry naming only its own agents needs nobody else's."""
    own = {agent.name: AgentWrites(agent.name) for agent in registry.agents.values()}
    names = set(known_agents) if known_agents is not None else (set(agents) if agents is not None else None)
    only_own = own and not (set(registry.aliases) - set(registry.agents)) and registry.defaults.agent is None
    if names is None and not only_own:
        return Known(None, agents)
    writes = {**agents, **own} if agents is not None else (own if names is None else None)
    return Known(frozenset((names or set()) | set(own)), writes)


def _compile_one(
    folder: Path, root: Path, registry: Registry, known: Known
) -> tuple[CompiledPlaybook | None, list[ConfigProblem], dict[str, StepFile]]:
    problems: list[ConfigProblem] = []
    steps: dict[str, StepFile] = {}
    texts: list[str] = []
    sources: dict[str, str] = {}  # step -> its file relative to `root`, as the record names it
    under = folder.relative_to(root).as_posix()  # once per folder: pathlib costs per step add up
    paths = [path for path in sorted(folder.glob("*.md")) if path.name.lower() != "readme.md"]
    too_many = too_many_steps(folder, len(paths))
    if too_many is not None:  # refused before a file is read
        return None, [too_many], steps
    for path in paths:
        step, found = read_step(path, str(path), registry)
        problems += found
        if step is not None:
            steps[step.name], sources[step.name] = step, f"{under}/{path.name}"
            texts.append(f"{sources[step.name]}\n{step.text}")  # the text read_step read
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
    compiled = [
        _compiled_step(steps[name], sources[name], registry, event_fields or ()) for name in graph.order
    ]
    playbook = CompiledPlaybook(
        name=folder.name, trigger=entry.trigger, steps=tuple(compiled), content_hash=""
    )
    playbook = playbook.model_copy(update={"content_hash": _content_hash(playbook, texts, registry)})
    too_big = too_large(playbook, folder)
    return (None, [too_big], steps) if too_big is not None else (playbook, [], steps)


def _compiled_step(
    step: StepFile, source: str, registry: Registry, event_fields: tuple[TypedField, ...]
) -> PlaybookStep:
    budget = step.budget_usd if step.budget_usd is not None else registry.defaults.budget_usd
    carried = carried_fields(step, registry, event_fields)
    return PlaybookStep(
        name=step.name,
        agent=resolve_agent(step, registry) or "",
        instructions=step.body.strip() + "\n",
        after=step.after,
        output=step.output + asked_fields(step, registry, event_fields),
        emits=step.emits,
        emit_when=step.emit_when,
        carried=carried,
        budget_usd=budget,
        approval=step.approval or registry.defaults.approval,
        source=source,
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
