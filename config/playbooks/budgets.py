"""A step's (or the registry's default) `budget:`, in either form:

    budget: $0.50                                     # US dollars
    budget: {wall_clock: 20, spend: {usd: 4}}         # Loopy's: minutes, and dollars

The dollars are the step's ceiling. A step's task is bounded in time by its agent's
`spec.limits.wall_clock`, not per step, so `wall_clock` is a warning saying so, and so are
Loopy's `window` and `latency`, which nothing here measures.
"""

from __future__ import annotations

from typing import Any

from config.playbooks.registry_values import parse_usd, unknown_key
from config.playbooks.yaml_text import YamlDoc
from config.problems import ConfigProblem, Loc

__all__ = ["read_budget"]

BUDGET_KEYS = ("wall_clock", "spend", "window", "latency")


def read_budget(
    doc: YamlDoc, loc: Loc, value: Any
) -> tuple[float | None, list[ConfigProblem], list[ConfigProblem]]:
    """(dollars or None, problems, warnings) of the budget written at `loc`."""
    if not isinstance(value, dict):
        try:
            return parse_usd(value), [], []
        except ValueError as exc:
            return None, [doc.problem(loc, str(exc))], []
    problems = [
        doc.problem((*loc, str(k)), unknown_key(k, BUDGET_KEYS)) for k in value if k not in BUDGET_KEYS
    ]
    warnings = []
    if "wall_clock" in value:
        message = (
            f"wall_clock {value['wall_clock']!r} is not a per-step limit here; each step's task is "
            "bounded by its agent's spec.limits.wall_clock"
        )
        warnings.append(doc.problem((*loc, "wall_clock"), message))
    for key in ("window", "latency"):  # Loopy's, in days
        if key in value:
            message = f"{key} {value[key]!r} has no effect here: only spend.usd caps a step"
            warnings.append(doc.problem((*loc, key), message))
    spend = value.get("spend")
    if spend is None:
        return None, problems, warnings
    if not isinstance(spend, dict) or set(spend) != {"usd"}:
        return None, [*problems, doc.problem((*loc, "spend"), "write spend: {usd: 4}")], warnings
    try:
        return parse_usd(spend["usd"]), problems, warnings
    except ValueError as exc:
        return None, [*problems, doc.problem((*loc, "spend", "usd"), str(exc))], warnings
