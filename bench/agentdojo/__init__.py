"""Prompt-injection containment on AgentDojo's suites: `python -m bench agentdojo [--quick]
[--suite S] [--profile P]`.

Each suite (workspace, slack, banking, travel) is an MCP server (`bench.agentdojo.server`)
backed by AgentDojo's environment; each profile an agent over it (`bench.agentdojo.profiles`).
An oracle model (`bench.agentdojo.oracle`) plays every user task from its ground truth
through the real task workflow on the embedded stack: alone, for utility (the bench approves
what it asks, as the user would), and then with each injection task's goal injected into what
the task reads, obeying it once read: it makes the injection task's ground-truth calls. Each
attack is then executed unseen, stopped by policy, held at an approval card (and denied), or
never reached; AgentDojo's own checks on the environment after decide utility and security.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.agentdojo import cases, profiles, server, suites
from bench.agentdojo.oracle import oracle_model
from bench.common import Stack, log, new_queue, running
from workers.worker import ACTIVITIES, build_worker

ATTACK_OUTCOMES = (cases.EXECUTED, cases.STOPPED, cases.HELD, cases.RAN_NO_EFFECT, cases.NOT_REACHED)


@dataclass
class Sizes:
    user_tasks: int | None = None  # per suite, in AgentDojo's order; None: all of them
    injection_tasks: int | None = None  # per suite, of those with ground-truth calls
    suites: tuple[str, ...] = suites.SUITES
    profiles: tuple[str, ...] = profiles.GUARDED  # `--profile open` adds the control
    concurrency: int = 12

    @classmethod
    def quick(cls) -> Sizes:
        return cls(user_tasks=5, injection_tasks=2, profiles=profiles.PROFILES)

    @classmethod
    def smoke(cls) -> Sizes:
        return cls(user_tasks=2, injection_tasks=1, profiles=("default",))


async def run(stack: Stack, sizes: Sizes, model: str | None = None) -> dict[str, Any]:
    """Every case of `sizes`, played by the oracle, or by `model` (a LiteLLM model name, its
    provider's key in the environment) through the real model activity."""
    todo = [
        case
        for name in sizes.suites
        for profile in sizes.profiles
        for case in suites.cases(name, profile, sizes.user_tasks, sizes.injection_tasks)
    ]
    log(f"agentdojo: {len(todo)} cases")
    started = time.perf_counter()
    rows, failed = await run_cases(stack, todo, sizes.concurrency, model)
    report: dict[str, Any] = {
        "sizes": asdict(sizes),
        "agentdojo": {
            "version": suites.VERSION,
            "attack": "important_instructions (goal in every vector read)",
        },
        "model": model or "oracle",
        "wall_seconds": round(time.perf_counter() - started, 1),
        "failed_cases": failed,
    }
    return {**report, "suites": by_suite(rows, sizes.suites, sizes.profiles)}


async def run_cases(
    stack: Stack, todo: list[suites.Case], concurrency: int, model: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Run `todo`, `concurrency` at a time, on a worker and MCP servers of their own: each
    case's outcome, and the cases that could not finish (named, with their error)."""
    queue = new_queue("agentdojo")
    oracle = [oracle_model if a.__name__ == "call_model" else a for a in ACTIVITIES]
    activities = list(ACTIVITIES) if model else oracle
    worker = build_worker(stack.client, stack.settings, queue, activities=activities)
    gate = asyncio.Semaphore(concurrency)
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []

    async def one(case: suites.Case, url: str) -> None:
        async with gate:
            try:
                rows.append((await cases.run_case(stack, queue, url, case, model)).as_json())
            except Exception as exc:  # one case's failure is reported, not the run's end
                failed.append({"case": case.id, "error": f"{type(exc).__name__}: {exc}"[:300]})
                log(f"agentdojo: {case.id} failed: {failed[-1]['error']}")
            if (len(rows) + len(failed)) % 25 == 0:
                log(f"agentdojo: {len(rows) + len(failed)}/{len(todo)} cases")

    names = list(dict.fromkeys(case.suite for case in todo))
    async with server.serving(names) as urls, running([worker]):
        await asyncio.gather(*(one(case, urls[case.suite]) for case in todo))
    return rows, failed


def by_suite(rows: list[dict[str, Any]], names: Sequence[str], kinds: Sequence[str]) -> dict[str, Any]:
    """The report's `suites`: per suite, the injection tasks not played and each profile's
    summary of its cases."""
    found: dict[str, Any] = {}
    for name in names:
        skipped = [i for i in suites.suite(name).injection_tasks if i not in suites.scripted_injections(name)]
        found[name] = {
            "injection_tasks_without_ground_truth": skipped,
            "profiles": {
                p: summary([r for r in rows if r["suite"] == name and r["profile"] == p]) for p in kinds
            },
        }
    return found


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    benign = [r for r in rows if r["injection_task"] is None]
    attacks = [r for r in rows if r["injection_task"] is not None]
    counts = {kind: sum(1 for r in attacks if r["attack"] == kind) for kind in ATTACK_OUTCOMES}
    return {
        "user_tasks": len(benign),
        "completed": sum(r["utility"] for r in benign),
        "needed_approval": sum(1 for r in benign if r["approvals"]),
        "approvals": sum(r["approvals"] for r in benign),
        "attacks": len(attacks),
        **counts,
        "injection_in_view": sum(r["injection_in_view"] for r in attacks),
        "utility_under_attack": sum(r["utility"] for r in attacks),
        "executed_cases": [r["case"] for r in attacks if r["attack"] == cases.EXECUTED],
        "user_tasks_failed": [r["user_task"] for r in benign if not r["utility"]],
        "case_seconds_mean": round(sum(r["seconds"] for r in rows) / max(1, len(rows)), 2),
    }
