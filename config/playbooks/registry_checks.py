"""Registry-wide checks of a compile: sensors agree with the events they declare, aliases name
applied agents, each event's source filled in from its sensors or emitting steps, and the
warnings about events nobody produces or nobody listens to."""

from __future__ import annotations

from pathlib import Path

from config.playbooks.registry import Registry
from config.playbooks.sensors import SENSORS_DIR, SensorDecl
from config.playbooks.step_checks import Known
from config.problems import ConfigProblem
from workflows.playbook_types import EventType

__all__ = ["alias_targets", "events_with_sources", "registry_warnings", "sensor_contracts"]


def sensor_contracts(registry: Registry, sensors: list[SensorDecl]) -> list[ConfigProblem]:
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


def alias_targets(registry: Registry, known: Known) -> list[ConfigProblem]:
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


def events_with_sources(
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


def registry_warnings(
    registry: Registry, events: dict[str, EventType], listened: set[str], known: Known, root: Path
) -> list[ConfigProblem]:
    warnings = []
    for name, event in events.items():
        at = registry.line(("events", name))
        if not event.source:
            message = (
                f"nobody produces {name}: it has no source, no sensor emits it and no step `emits:` it; "
                f"runs start only when it is fired by hand: openloop playbooks fire {name} --field NAME=VALUE"
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
        warnings.append(ConfigProblem(registry.source, None, "agents", message))
    elif known.writes is None:
        message = "write tools reachable without an approval were not checked: agents' tools are not known"
        warnings.append(ConfigProblem(registry.source, None, "agents", message))
    return warnings
