"""What keeps a compiled playbook runnable: at most `MAX_STEPS_PER_PLAYBOOK` steps (counted
before a file is read, so a folder of 10,000 steps is refused at once), a compiled record well
under Temporal's payload limit (it rides whole in every run's input), and a warning when more
steps can be ready together than a run starts at once (`workflows.playbook_limits`)."""

from __future__ import annotations

from pathlib import Path

from config.problems import ConfigProblem
from workflows.playbook_limits import (
    MAX_COMPILED_BYTES,
    MAX_PARALLEL_STEPS,
    MAX_STEPS_PER_PLAYBOOK,
    TEMPORAL_PAYLOAD_LIMIT,
)
from workflows.playbook_types import CompiledPlaybook

__all__ = ["too_large", "too_many_steps", "too_wide"]


def _kib(size: int) -> str:
    return f"{size / 1024:,.0f} KiB"


def too_many_steps(folder: Path, count: int) -> ConfigProblem | None:
    if count <= MAX_STEPS_PER_PLAYBOOK:
        return None
    message = (
        f"{count} step files: a playbook has at most {MAX_STEPS_PER_PLAYBOOK} steps (each is a child "
        "agent task); split it into playbooks that start each other with `emits:`"
    )
    return ConfigProblem(str(folder), None, "steps", message)


def too_large(playbook: CompiledPlaybook, folder: Path) -> ConfigProblem | None:
    """The compiled record's size as a run's input carries it, against `MAX_COMPILED_BYTES`."""
    size = len(playbook.model_dump_json().encode())
    if size <= MAX_COMPILED_BYTES:
        return None
    biggest = max(playbook.steps, key=lambda step: len(step.instructions.encode()))
    message = (
        f"compiled, the playbook is {_kib(size)}, over the {_kib(MAX_COMPILED_BYTES)} a run can carry "
        f"(Temporal refuses any payload over {_kib(TEMPORAL_PAYLOAD_LIMIT)}, and the event and outputs "
        f"travel with it); shorten the steps' prose (the longest: {biggest.source}, "
        f"{_kib(len(biggest.instructions.encode()))}) or split the playbook"
    )
    return ConfigProblem(str(folder), None, "", message)


def too_wide(playbook: CompiledPlaybook, folder: Path) -> ConfigProblem | None:
    """A warning when more steps share one depth (so can be ready together) than run at once."""
    depth: dict[str, int] = {}
    for step in playbook.steps:  # topological: a step's parents come first
        depth[step.name] = 1 + max((depth[parent] for parent in step.after), default=-1)
    widths: dict[int, int] = {}
    for level in depth.values():
        widths[level] = widths.get(level, 0) + 1
    level, width = max(widths.items(), key=lambda item: item[1])
    if width <= MAX_PARALLEL_STEPS:
        return None
    message = (
        f"{width} steps, {level} step(s) from the entry, can be ready at once; a run keeps at most "
        f"{MAX_PARALLEL_STEPS} child tasks going and the others wait for a free slot"
    )
    return ConfigProblem(str(folder), None, "after", message)
