"""Playbooks that start each other in a loop: a step of A `emits: X`, B starts `on: X` and
emits Y, and A starts `on: Y`. Each event starts the next run, so the loop goes on until the
run-time cap on emitted chains stops it (`MAX_EMIT_DEPTH`). The compiler warns with the loop's
path, from the emitting step's `emits:` line; one playbook emitting its own trigger is a loop
too. An emitting step without a condition but with an enum output is told how to add one
(`emits: {event: X, when: "verdict == fail"}`). Linear in playbooks and emitting steps
(cycles found with `graph.find_cycles`)."""

from __future__ import annotations

from config.playbooks.graph import find_cycles
from config.playbooks.step_files import StepFile
from config.problems import ConfigProblem
from workflows.playbook_calls import MAX_EMIT_DEPTH

__all__ = ["emit_loops"]


def emit_loops(playbooks: dict[str, dict[str, StepFile]]) -> list[ConfigProblem]:
    """A warning per loop among `playbooks` (each name -> its steps), at its first emitting step."""
    starts_on: dict[str, list[str]] = {}  # event -> the playbooks whose entry step listens for it
    for name, steps in playbooks.items():
        for step in steps.values():
            if step.trigger is not None and step.trigger.event:
                starts_on.setdefault(step.trigger.event, []).append(name)
    # `after` as `find_cycles` reads it: a playbook runs after each playbook that starts it.
    links: dict[tuple[str, str], StepFile] = {}  # (emitting playbook, started one) -> first step
    after: dict[str, list[str]] = {name: [] for name in playbooks}
    for name in sorted(playbooks):
        for step in sorted(playbooks[name].values(), key=lambda s: s.name):
            for started in starts_on.get(step.emits or "", []):
                if (name, started) not in links:
                    links[name, started] = step
                    after[started].append(name)
    warnings = []
    for found in find_cycles({name: tuple(parents) for name, parents in after.items()}):
        lead = found.index(min(found))  # told from the playbook whose name sorts first
        cycle = [*found[lead:-1], *found[:lead], found[lead]]
        pairs = list(zip(cycle, cycle[1:], strict=False))
        hops = [links[pair] for pair in pairs]
        how = "; ".join(
            f"{emitting}/{hop.name} emits {hop.emits}, which starts {started}"
            for (emitting, started), hop in zip(pairs, hops, strict=True)
        )
        message = (
            f"playbooks start each other in a loop: {' → '.join(cycle)} ({how}); every event starts "
            f"the next run until the chain stops at depth {MAX_EMIT_DEPTH}; make one of them not emit, "
            "or start on another event"
        )
        if hops[0].emit_when is None and any(f.choices for f in hops[0].output):
            message += (
                f"; to emit only on a verdict, write emits: {{event: {hops[0].emits}, "
                f'when: "{next(f for f in hops[0].output if f.choices).name} == VALUE"}}'
            )
        warnings.append(hops[0].doc.problem(("emits",), message))
    return warnings
