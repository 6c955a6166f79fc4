"""A playbook's DAG: one entry step (`on:`), every other step `after:` others.

Refused: no entry or more than one, a step with neither `on:` nor `after:` (an orphan), an
`after:` naming no step, a cycle (reported with its path, `a → b → a`), and a step that can
never run because something it waits for never runs. What passes has a topological order
with the entry first; whether one step is upstream of another (what its prose may reference)
is a walk of the `after:` edges when asked, kept to the steps placed between the two in that
order (`Graph.is_upstream`). Every pass here is linear in steps and edges and
none recurses, so no set of all ancestors is kept per step (quadratic in a long chain) and a
deep chain cannot exhaust the stack.
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from config.playbooks.step_files import StepFile
from config.problems import ConfigProblem

__all__ = ["Graph", "build_graph", "find_cycles"]


@dataclass
class Graph:
    entry: str | None = None
    order: list[str] = field(default_factory=list)  # runnable steps, entry first
    after: dict[str, tuple[str, ...]] = field(default_factory=dict)  # step -> steps it names that exist
    rank: dict[str, int] = field(default_factory=dict)  # a runnable step's place in `order`

    def is_upstream(self, name: str, of: str) -> bool:
        """Whether `name` runs before `of`: some path of `after:` edges leads from `of` to it.

        When `of` runs, so does all it waits for, each placed before it in `order`, the entry
        first: the entry and `of`'s own parents are answered at once, and the walk back from
        `of` passes only steps placed after `name`, so a reference to a nearby step costs the
        steps between the two, not the whole chain."""
        high, low = self.rank.get(of), -1  # -1: `of` never runs, so the walk is not cut short
        if high is not None:
            low = self.rank.get(name, -1)
            if low < 0 or low >= high:
                return False  # `name` never runs, or runs no earlier than `of`
            if low == 0 or name in self.after.get(of, ()):
                return True
        seen: set[str] = set()
        todo = list(self.after.get(of, ()))
        while todo:
            step = todo.pop()
            if step == name:
                return True
            # A step placed before `name` cannot lead to it (unplaced ones count as after it).
            if step not in seen and self.rank.get(step, low + 1) > low:
                seen.add(step)
                todo.extend(self.after.get(step, ()))
        return False


def find_cycles(after: dict[str, tuple[str, ...]]) -> list[list[str]]:
    """Each cycle among `after` edges once, as the path it runs: [a, b, a] for a → b → a."""
    cycles: list[list[str]] = []
    seen_sets: set[frozenset[str]] = set()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(after):
        if start in state:
            continue
        state[start] = 1
        path = [start]
        stack: list[Iterator[str]] = [iter(after.get(start, ()))]
        while stack:  # depth first, with the path kept by hand instead of by recursion
            parent = next(stack[-1], None)
            if parent is None:
                stack.pop()
                state[path.pop()] = 2
            elif parent not in after:
                continue
            elif state.get(parent) == 1:
                loop = path[path.index(parent) :]
                if frozenset(loop) not in seen_sets:
                    seen_sets.add(frozenset(loop))
                    # Written in running order: the step that must run first leads.
                    cycles.append([*reversed(loop), loop[-1]])
            elif state.get(parent) is None:
                state[parent] = 1
                path.append(parent)
                stack.append(iter(after.get(parent, ())))
    return cycles


def build_graph(playbook: str, steps: dict[str, StepFile]) -> tuple[Graph, list[ConfigProblem]]:
    graph = Graph()
    problems: list[ConfigProblem] = []
    entries = [step for step in steps.values() if "on" in step.doc.data]
    if not entries:
        message = (
            f"playbook {playbook!r} has no entry step; give exactly one step `on: EventName` "
            'or `on: cron("0 3 * * *")`'
        )
        first = next(iter(steps.values()), None)  # the place to add `on:`
        problems.append(
            first.doc.problem(("on",), message) if first else ConfigProblem(playbook, None, "on", message)
        )
    for extra in entries[1:]:
        message = (
            f"a second entry step (the entry is {entries[0].name!r}, {entries[0].source}); "
            f"a playbook has exactly one: replace `on:` with `after: <step>`"
        )
        problems.append(extra.doc.problem(("on",), message))
    for step in steps.values():
        if "on" in step.doc.data and step.after:
            problems.append(
                step.doc.problem(("after",), "the entry step runs on its trigger; remove `after:`")
            )
        if "on" not in step.doc.data and not step.after and "after" not in step.doc.data:
            message = (
                "orphan step: it has neither `on:` nor `after:`; add `after: <step>` to run it after another"
            )
            problems.append(ConfigProblem(step.source, 2, "after", message))
    after: dict[str, tuple[str, ...]] = {}
    for step in steps.values():
        known = []
        for parent in step.after:
            if parent in steps:
                known.append(parent)
                continue
            close = difflib.get_close_matches(parent, list(steps), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            message = f"no step {parent!r} in playbook {playbook!r}; {hint}steps: {', '.join(sorted(steps))}"
            problems.append(step.doc.problem(("after",), message))
        after[step.name] = tuple(known)
    in_cycle: set[str] = set()
    for cycle in find_cycles(after):
        in_cycle.update(cycle)
        first = steps[cycle[1]] if len(cycle) > 1 else steps[cycle[0]]
        path = " → ".join(cycle)
        message = f"a cycle: {path}; steps run once each, so remove one of these `after:` edges"
        problems.append(first.doc.problem(("after",), message))
    graph.after = after
    if len(entries) == 1 and "on" in entries[0].doc.data and not entries[0].after:
        graph.entry = entries[0].name
        _order(graph, after, steps, in_cycle, problems)
    return graph, problems


def _order(
    graph: Graph,
    after: dict[str, tuple[str, ...]],
    steps: dict[str, StepFile],
    in_cycle: set[str],
    problems: list[ConfigProblem],
) -> None:
    """Kahn's order from the entry: a step runs once everything it is after has run.

    The order is the one that sweeping the waiting steps by name, again and again, would give
    (so content hashes stay as they were): a step's sweep is the latest of its parents', one
    later when the parent's name sorts after its own, and steps sort by (sweep, name).
    """
    entry = graph.entry
    assert entry is not None
    waiting = sorted(name for name in steps if name != entry and after[name])
    missing: dict[str, int] = {}
    children: dict[str, list[str]] = {}
    for name in waiting:
        if len(after[name]) == len(steps[name].after):  # else an `after:` names no step
            missing[name] = len(after[name])
            for parent in after[name]:
                children.setdefault(parent, []).append(name)
    sweep = {entry: 0}
    ready = deque([entry])
    while ready:
        parent = ready.popleft()
        for child in children.get(parent, ()):
            missing[child] -= 1
            if missing[child] == 0:
                sweep[child] = max(1 if p == entry else sweep[p] + (child < p) for p in after[child])
                ready.append(child)
    graph.order = [entry, *sorted((name for name in sweep if name != entry), key=lambda n: (sweep[n], n))]
    graph.rank = {name: place for place, name in enumerate(graph.order)}
    for name in waiting:
        if name in sweep or name in in_cycle or len(after[name]) != len(steps[name].after):
            continue  # it runs, or already reported: the cycle, or an `after:` naming no step
        never = next(p for p in after[name] if p not in sweep)
        message = (
            f"orphan step: not reachable from the entry step {entry!r}, because {never!r} "
            "never runs; make it run after a step reachable from the entry"
        )
        problems.append(steps[name].doc.problem(("after",), message))
