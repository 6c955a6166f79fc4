"""The checks of one step that need the whole playbook: its agent and what the agent may write,
its budget, the references in its prose, and the event it emits.

A step's agent is written as an alias from `registry.yaml` or an agent's name. When the
caller knows which agents are applied, an unknown one is an error; when it also knows what
each agent's tools write, a step whose agent may write without an approval is an error
unless the step (or the registry's default) says `approval: required`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from config.playbooks.agents import AgentWrites
from config.playbooks.graph import Graph
from config.playbooks.references import find_references
from config.playbooks.registry import Registry
from config.playbooks.step_files import StepFile
from config.playbooks.typed_fields import type_text
from config.problems import ConfigProblem
from workflows.playbook_types import FieldKind, TypedField

__all__ = ["CRON_FIELDS", "Known", "asked_fields", "carried_fields", "check_step", "resolve_agent"]

# The event a cron entry step receives: when this tick was due, and when the last one was.
CRON_FIELDS = (
    TypedField(name="scheduled_at", kind=FieldKind.STR),
    TypedField(name="last_run", kind=FieldKind.STR, optional=True),
)


@dataclass(frozen=True)
class Known:
    """What the caller knows of the installation's agents (None: not checked)."""

    names: frozenset[str] | None = None
    writes: Mapping[str, AgentWrites] | None = None


def resolve_agent(step: StepFile, registry: Registry) -> str | None:
    written = step.agent or registry.defaults.agent
    return registry.aliases.get(written, written) if written else None


def _close(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def _agent(step: StepFile, registry: Registry, known: Known) -> list[ConfigProblem]:
    resolved = resolve_agent(step, registry)
    if resolved is None:
        message = "no agent runs this step; add `agent: <name or alias>` (or defaults.agent in registry.yaml)"
        return [step.doc.problem(("agent",), message)]
    written = step.agent or registry.defaults.agent or ""
    if known.names is None or resolved in known.names:
        return _writes(step, registry, known, resolved)
    if written in registry.aliases:
        return []  # the alias's own line says its agent is unknown
    choices = sorted(known.names | set(registry.aliases))
    message = (
        f"unknown agent {written!r}; {_close(written, choices)}apply it first "
        f"(openloop agents apply -f FILE) or alias it in registry.yaml; known: {', '.join(choices) or 'none'}"
    )
    return [step.doc.problem(("agent",), message)]


def _writes(step: StepFile, registry: Registry, known: Known, agent: str) -> list[ConfigProblem]:
    if known.writes is None or agent not in known.writes:
        return []
    ungated = known.writes[agent].ungated
    if (step.approval or registry.defaults.approval) == "required" or not ungated:
        return []
    message = (
        f"agent {agent!r} may call {', '.join(ungated)}, which write, without an approval; add "
        f"`approval: required` to this step, or list them in the agent's spec.approvals.require_for"
    )
    key = "approval" if "approval" in step.doc.data else "agent"
    return [step.doc.problem((key,), message)]


def _budget(step: StepFile, registry: Registry) -> list[ConfigProblem]:
    if not registry.defaults.require_budget or step.budget_usd is not None or registry.defaults.budget_usd:
        return []
    if "budget" in step.doc.data:
        return []  # the budget is there but wrong; its own problem says how
    message = (
        f"no budget, and {registry.source} requires one (defaults.require_budget); add `budget: $0.50` "
        "here or `defaults.budget` in the registry"
    )
    return [step.doc.problem(("budget",), message)]


def _fields_text(fields: tuple[TypedField, ...]) -> str:
    return ", ".join(f"{f.name}: {type_text(f)}" for f in fields) or "none"


def _references(
    step: StepFile, steps: Mapping[str, StepFile], graph: Graph, event_fields: tuple[TypedField, ...] | None
) -> list[ConfigProblem]:
    problems = []
    runs = step.name in graph.rank  # else it never runs: its own problem says why
    for ref in find_references(step.body, step.body_line):

        def problem(message: str) -> None:
            problems.append(ConfigProblem(step.source, ref.line, "body", message))  # noqa: B023

        if ref.problem:
            problem(ref.problem)
        elif ref.step is None:
            names = [f.name for f in event_fields or ()]
            if event_fields is not None and ref.field not in names:
                problem(
                    f"{ref.text}: the triggering event has no field {ref.field!r}; "
                    f"{_close(ref.field, names)}its fields: {_fields_text(event_fields)}"
                )
        elif ref.step not in steps:
            problem(
                f"{ref.text}: no step {ref.step!r} in this playbook; {_close(ref.step, list(steps))}"
                f"its steps: {', '.join(steps)}"
            )
        elif runs and not graph.is_upstream(ref.step, step.name):
            problem(
                f"{ref.text}: step {ref.step!r} is not upstream of {step.name!r}, so its output is not "
                f"there yet; add `after: {ref.step}` or reference a step this one runs after"
            )
        elif ref.field not in {f.name for f in steps[ref.step].output}:
            outputs = steps[ref.step].output
            problem(
                f"{ref.text}: step {ref.step!r} declares no output {ref.field!r}; "
                f"{_close(ref.field, [f.name for f in outputs])}its output: {_fields_text(outputs)} "
                f"(add the field to `output:` in {steps[ref.step].source})"
            )
    return problems


def _condition(step: StepFile) -> list[ConfigProblem]:
    """`when:` names one of the step's output fields, and a value that field can have."""
    when = step.emit_when
    if when is None:
        return []
    output = {f.name: f for f in step.output}
    have = output.get(when.name)
    if have is None:
        message = (
            f"when: {when}: the step declares no output {when.name!r}; {_close(when.name, list(output))}"
            f"its output: {_fields_text(step.output)}"
        )
        return [step.doc.problem(("emits", "when"), message)]
    allowed = (
        have.choices
        if have.kind is FieldKind.ENUM
        else ("true", "false")
        if have.kind is FieldKind.BOOL
        else None
    )
    if allowed is not None and when.value not in allowed:
        message = (
            f"when: {when}: {when.name} is {type_text(have)}, so compare it with one of: {', '.join(allowed)}"
        )
        return [step.doc.problem(("emits", "when"), message)]
    return []


def carried_fields(
    step: StepFile, registry: Registry, event_fields: tuple[TypedField, ...] | None
) -> tuple[str, ...]:
    """The emitted event's fields the step's output lacks and the run's triggering event has, of
    the same type: they are carried over from it (a loop-back re-emits its `brief` unchanged)."""
    if step.emits is None or event_fields is None:
        return ()
    output = {f.name for f in step.output}
    incoming = {f.name: f for f in event_fields}
    return tuple(
        wanted.name
        for wanted in registry.events[step.emits].fields
        if wanted.name not in output
        and wanted.name in incoming
        and (incoming[wanted.name].kind, incoming[wanted.name].choices) == (wanted.kind, wanted.choices)
    )


def asked_fields(
    step: StepFile, registry: Registry, event_fields: tuple[TypedField, ...] | None
) -> tuple[TypedField, ...]:
    """The emitted event's required fields neither in the output nor carried over: a Loopy step
    leaves them to its agent (`origin` set from the prose), so the agent is asked for them
    along with its output."""
    if step.emits is None or event_fields is None:
        return ()
    output = {f.name for f in step.output}
    carried = set(carried_fields(step, registry, event_fields))
    return tuple(
        wanted
        for wanted in registry.events[step.emits].fields
        if not wanted.optional and wanted.name not in output and wanted.name not in carried
    )


def _emits(
    step: StepFile, registry: Registry, event_fields: tuple[TypedField, ...] | None
) -> list[ConfigProblem]:
    """The emitted event is the step's output, what it carries over from the triggering event and
    what the agent is asked for besides: an output field of the wrong type is an error."""
    if step.emits is None:
        return []
    output = {f.name: f for f in step.output}
    wrong = [
        f"{wanted.name}: {type_text(wanted)} (the output says {type_text(output[wanted.name])})"
        for wanted in registry.events[step.emits].fields
        if wanted.name in output
        and (output[wanted.name].kind, output[wanted.name].choices) != (wanted.kind, wanted.choices)
    ]
    asked = asked_fields(step, registry, event_fields)
    if asked:
        carried = carried_fields(step, registry, event_fields)
        kept = f"; {', '.join(carried)} carried unchanged from the triggering event" if carried else ""
        them = "it" if len(asked) == 1 else "them"
        message = (
            f"emits {step.emits}: {', '.join(type_text_named(f) for f in asked)} not in `output:`, so "
            f"the agent is asked for {them} with its output{kept}; declare a field in `output:` to set "
            "it there"
        )
        step.warnings.append(step.doc.problem(("emits",), message))
    if not wrong:
        return []
    message = f"emits {step.emits}, whose fields must keep their types: {'; '.join(wrong)}; fix `output:`"
    return [step.doc.problem(("emits",), message)]


def type_text_named(field: TypedField) -> str:
    return f"{field.name}: {type_text(field)}"


def check_step(
    step: StepFile,
    steps: Mapping[str, StepFile],
    graph: Graph,
    registry: Registry,
    known: Known,
    event_fields: tuple[TypedField, ...] | None,
) -> list[ConfigProblem]:
    """Every problem of `step` that the file alone cannot show. `event_fields` is None when the
    playbook's trigger is itself wrong (its problem is reported once, at the entry step)."""
    return [
        *_agent(step, registry, known),
        *_budget(step, registry),
        *_references(step, steps, graph, event_fields),
        *_emits(step, registry, event_fields),
        *_condition(step),
    ]
