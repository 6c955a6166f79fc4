"""`registry.yaml` (or Loopy's `registry.yml`): the events steps listen to and emit, agent
aliases or the project's own agents, defaults.

    events:
      CIFailed:
        fields: {repo: str, branch: str, run_url: str}
        github: {event: workflow_run, conclusion: failure, branch: main}
      DeployAsked:
        fields: {text: str}
        slack: {message: {channel: C0DEVPLAT, pattern: "^deploy "}}   # or mention, reaction: {name}
      Incident:
        fields: {title: str, link: str?}
        webhook: {hook: sentry, secret_env: SENTRY_WEBHOOK_SECRET}    # or sensor: sentry:issues
      Triaged:                                      # no source: a step `emits:` it
        fields: {verdict: enum[flaky, real]}
    agents: {triager: dev-platform}                 # alias -> applied agent name
    defaults: {budget: $0.50, require_budget: true, approval: agent, agent: triager}

An event's fields may also be written bare, Loopy's way (`TextSubmitted: {text: str}`). Loopy's
`defaults.agent` mapping, `sandboxes:` and Capitalized agents are read by
`config.playbooks.project_agents`; its `limits:` is a warning (nothing enforces it here).
`cron("...")` is built in and needs no entry. Every problem names the file, line and field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.playbooks.budgets import read_budget
from config.playbooks.project import registry_path
from config.playbooks.project_agents import ProjectAgent, is_project_agent, read_project_agents
from config.playbooks.registry_values import bare_fields, parse_usd, unknown_key
from config.playbooks.typed_fields import read_field_map
from config.playbooks.yaml_text import YamlDoc, load_yaml
from config.problems import ConfigProblem, Loc
from workflows.playbook_types import EventType

__all__ = ["APPROVALS", "Defaults", "Registry", "parse_usd", "read_registry", "unknown_key"]

REGISTRY_FILE = "registry.yaml"
EVENT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
ALIAS = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")  # agent names' rule
SOURCES = ("slack", "github", "webhook", "sensor")
EVENT_KEYS = ("fields", "description", *SOURCES)
TOP_KEYS = ("events", "agents", "defaults", "sandboxes", "limits")
DEFAULT_KEYS = ("budget", "require_budget", "approval", "agent")
APPROVALS = ("agent", "required")  # the agent's own rules, or every write waits for a person
_SLACK_KINDS = {"mention": (), "message": ("channel", "pattern"), "reaction": ("name",)}
_HOOK = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_SENSOR_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True)
class Defaults:
    budget_usd: float | None = None
    require_budget: bool = False
    approval: str = "agent"
    agent: str | None = None


@dataclass
class Registry:
    source: str
    events: dict[str, EventType] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    defaults: Defaults = Defaults()
    doc: YamlDoc | None = None  # None when there is no registry file
    sensor_refs: dict[str, str] = field(default_factory=dict)  # event -> `module:function`
    agents: dict[str, ProjectAgent] = field(default_factory=dict)  # the project's own, by written name
    warnings: list[ConfigProblem] = field(default_factory=list)  # what the file says that means nothing here

    def line(self, loc: Loc) -> int | None:
        return self.doc.line(loc) if self.doc is not None else None


def read_registry(root: Path) -> tuple[Registry, list[ConfigProblem]]:
    """The registry in `root/registry.yaml` or `registry.yml` (empty when there is none) and
    its problems; what it says that means nothing here is in `registry.warnings`."""
    path, problems = registry_path(root)
    registry = Registry(str(path))
    if problems or not path.is_file():
        return registry, problems
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return registry, [ConfigProblem(str(path), None, "", f"cannot read: {exc}")]
    doc, problems = load_yaml(text, str(path))
    if doc is None:
        return registry, problems
    registry.doc = doc
    problems += [doc.problem((key,), unknown_key(key, TOP_KEYS)) for key in doc.data if key not in TOP_KEYS]
    if "limits" in doc.data:  # Loopy's cascade and per-workflow spend caps
        message = "limits: not enforced here; each step's budget caps its spend (budget: {spend: {usd: 4}})"
        registry.warnings.append(doc.problem(("limits",), message))
    problems += _read_events(doc, registry)
    problems += _read_aliases(doc, registry)
    problems += _read_defaults(doc, registry)
    project = read_project_agents(doc)
    registry.agents = project.agents
    registry.aliases.update({agent.written: agent.name for agent in project.agents.values()})
    registry.warnings += project.warnings
    return registry, problems + project.problems


def _mapping(doc: YamlDoc, loc: Loc, value: Any, example: str) -> tuple[dict[str, Any], list[ConfigProblem]]:
    if value is None:
        return {}, []
    if not isinstance(value, dict):
        return {}, [doc.problem(loc, f"expected a mapping, e.g. {example} (got {value!r})")]
    return value, []


def _read_events(doc: YamlDoc, registry: Registry) -> list[ConfigProblem]:
    events, problems = _mapping(doc, ("events",), doc.data.get("events"), "CIFailed: {fields: {repo: str}}")
    for name, entry in events.items():
        loc: Loc = ("events", str(name))
        if not isinstance(name, str) or not EVENT_NAME.match(name) or name == "cron":
            problems.append(doc.problem(loc, f"{name!r} is not an event name; write a word such as CIFailed"))
            continue
        if not isinstance(entry, dict):
            example = "{fields: {repo: str}, github: {event: workflow_run}}"
            problems.append(doc.problem(loc, f"expected a mapping such as {example} (got {entry!r})"))
            continue
        bare = bare_fields(entry, EVENT_KEYS)
        if bare:
            entry = {"fields": entry}  # Loopy's bare field map: `TextSubmitted: {text: str}`
        for key, value in entry.items():
            if key in EVENT_KEYS:
                continue
            if isinstance(value, str) and key not in SOURCES:
                example = f"fields: {{{key}: {value}}}"
                message = f"unknown key {key!r}; an event's fields go under `fields:`, e.g. {example}"
            else:
                message = unknown_key(key, EVENT_KEYS)
            problems.append(doc.problem((*loc, str(key)), message))
        fields, found = read_field_map(doc, loc if bare else (*loc, "fields"), entry.get("fields") or {})
        problems += found
        sources = [key for key in SOURCES if key in entry]
        if len(sources) > 1:
            message = f"one source per event (found {', '.join(sources)}); make one event per source"
            problems.append(doc.problem((*loc, sources[1]), message))
            continue
        source = ""
        match: dict[str, Any] = {}
        if sources:
            source = sources[0]
            match, found = _SOURCE_READERS[source](doc, (*loc, source), entry[source])
            problems += found
            if source == "sensor" and not found:
                registry.sensor_refs[name] = str(match["sensor"])
        registry.events[name] = EventType(name=name, fields=fields, source=source, match=match)
    return problems


def _slack(doc: YamlDoc, loc: Loc, value: Any) -> tuple[dict[str, Any], list[ConfigProblem]]:
    if value == "mention":
        return {"kind": "mention"}, []
    example = "mention, {message: {channel: C0123, pattern: 'deploy'}} or {reaction: {name: eyes}}"
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in _SLACK_KINDS:
        return {}, [doc.problem(loc, f"write one Slack source: {example}")]
    kind, options = next(iter(value.items()))
    options = options or {}
    if not isinstance(options, dict):
        return {}, [doc.problem((*loc, kind), f"expected a mapping, e.g. {example}")]
    problems = [
        doc.problem((*loc, kind, str(key)), unknown_key(key, (*_SLACK_KINDS[kind], "channel")))
        for key in options
        if key not in (*_SLACK_KINDS[kind], "channel")
    ]
    problems += [
        doc.problem((*loc, kind), f"{kind} needs `{needed}:`; add it")
        for needed in _SLACK_KINDS[kind]
        if not isinstance(options.get(needed), str) or not options[needed]
    ]
    if kind == "message" and isinstance(options.get("pattern"), str):
        try:
            re.compile(options["pattern"])
        except re.error as exc:
            problems.append(doc.problem((*loc, kind, "pattern"), f"not a regular expression: {exc}"))
    return {"kind": kind, **{str(k): v for k, v in options.items()}}, problems


def _github(doc: YamlDoc, loc: Loc, value: Any) -> tuple[dict[str, Any], list[ConfigProblem]]:
    example = "{event: workflow_run, conclusion: failure, branch: main}"
    if not isinstance(value, dict) or not isinstance(value.get("event"), str) or not value["event"]:
        return {}, [doc.problem(loc, f"name the GitHub webhook event and any filters, e.g. {example}")]
    problems = []
    for key, wanted in value.items():
        scalar = (str, int, float, bool)
        if not isinstance(wanted, scalar) and not (
            isinstance(wanted, list) and all(isinstance(item, scalar) for item in wanted)
        ):
            message = "a filter is a value or a list of values (any of them matches)"
            problems.append(doc.problem((*loc, str(key)), message))
    return {str(key): wanted for key, wanted in value.items()}, problems


def _webhook(doc: YamlDoc, loc: Loc, value: Any) -> tuple[dict[str, Any], list[ConfigProblem]]:
    example = "{hook: sentry, secret_env: SENTRY_WEBHOOK_SECRET}"
    if not isinstance(value, dict):
        return {}, [doc.problem(loc, f"expected {example}")]
    problems = [
        doc.problem((*loc, str(k)), unknown_key(k, ("hook", "secret_env")))
        for k in value
        if k not in ("hook", "secret_env")
    ]
    hook, secret = value.get("hook"), value.get("secret_env")
    if not isinstance(hook, str) or not _HOOK.match(hook):
        problems.append(
            doc.problem((*loc, "hook"), f"{hook!r}: name the hook (served at /hooks/NAME), e.g. {example}")
        )
    if not isinstance(secret, str) or not _ENV.match(secret):
        message = f"{secret!r}: name the environment variable holding the HMAC secret, e.g. {example}"
        problems.append(doc.problem((*loc, "secret_env"), message))
    return {"hook": hook, "secret_env": secret}, problems


def _sensor(doc: YamlDoc, loc: Loc, value: Any) -> tuple[dict[str, Any], list[ConfigProblem]]:
    if not isinstance(value, str) or not _SENSOR_REF.match(value):
        message = f"{value!r}: write module:function of a sensor in sensors/, e.g. sentry:sentry_issues"
        return {}, [doc.problem(loc, message)]
    return {"sensor": value}, []


_SOURCE_READERS = {"slack": _slack, "github": _github, "webhook": _webhook, "sensor": _sensor}


def _read_aliases(doc: YamlDoc, registry: Registry) -> list[ConfigProblem]:
    aliases, problems = _mapping(doc, ("agents",), doc.data.get("agents"), "triager: dev-platform")
    for alias, name in aliases.items():
        loc: Loc = ("agents", str(alias))
        if is_project_agent(alias, name):
            continue  # the project's own agent (`config.playbooks.project_agents`)
        if not isinstance(alias, str) or not ALIAS.match(alias):
            problems.append(
                doc.problem(loc, f"{alias!r} is not an alias; use lowercase letters, digits and -")
            )
        elif not isinstance(name, str) or not ALIAS.match(name):
            problems.append(
                doc.problem(loc, f"{name!r} is not an agent name; write the applied agent's name")
            )
        else:
            registry.aliases[alias] = name
    return problems


def _read_defaults(doc: YamlDoc, registry: Registry) -> list[ConfigProblem]:
    values, problems = _mapping(doc, ("defaults",), doc.data.get("defaults"), "{budget: $0.50}")
    problems += [
        doc.problem(("defaults", str(k)), unknown_key(k, DEFAULT_KEYS))
        for k in values
        if k not in DEFAULT_KEYS
    ]
    budget, require, approval, agent = None, False, "agent", None
    if values.get("budget") is not None:
        budget, found, warned = read_budget(doc, ("defaults", "budget"), values["budget"])
        problems += found
        registry.warnings += warned
    if "require_budget" in values:
        if isinstance(values["require_budget"], bool):
            require = values["require_budget"]
        else:
            problems.append(doc.problem(("defaults", "require_budget"), "write true or false"))
    if "approval" in values:
        if values["approval"] in APPROVALS:
            approval = values["approval"]
        else:
            message = f"{values['approval']!r}: allowed values are {', '.join(APPROVALS)}"
            problems.append(doc.problem(("defaults", "approval"), message))
    if "agent" in values:
        if isinstance(values["agent"], str):
            agent = values["agent"]
        elif isinstance(values["agent"], dict):
            pass  # Loopy's settings every project agent inherits (`project_agents`)
        else:
            problems.append(doc.problem(("defaults", "agent"), "name an agent or an alias"))
    registry.defaults = Defaults(budget, require, approval, agent)
    return problems
