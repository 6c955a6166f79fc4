"""The agent-runtime benches: `python -m bench all`, or one of orchestration, history,
tokens, throughput, parked, mcp, loops, fanout, dashboard; `python -m bench report` redraws the
tables from the last JSON results.

Sizes: the default run takes about 25 minutes on 2 cores (1,000 tasks at once in the
throughput sweep, 1,000 parked tasks); `--quick` about 5 minutes; `--full` parks 5,000
tasks (the parked bench alone then takes about 25 minutes there); `--smoke` runs every bench
once at a tiny size (its tests' sizes, about a minute in all), a check that none is broken,
its figures meaningless.

Each bench runs on one embedded stack started for the run (Temporal dev server in memory,
PostgreSQL + pgvector, a fake GitHub), writes bench/results/<bench>.json, and the tables
are printed and written into bench/RESULTS.md between its generated-section markers.
Run it from the repository root, on a quiet machine (`uptime`).

`python -m bench agentdojo [--quick] [--suite S] [--profile P] [--model M]` (prompt-injection
containment on AgentDojo's suites: about 15 minutes a profile at the default size, 3 quick) needs AgentDojo
installed (the `agentdojo` extra, then `pip install --no-deps agentdojo==0.1.35`) and is apart from
`all`; see `bench.agentdojo`.
`python -m bench egress [--quick]` (the sandbox's egress proxies, about a minute, no stack) is
apart from `all`, and so is `python -m bench chaos [--quick|--full] [--seed N]`: it starts its own
stack of processes (PostgreSQL, a Temporal dev server on a file, two agent workers and a loop
worker) twice, and stops them at seeded moments the second time (about 4 minutes at the
default size, 2 quick); see `bench.chaos`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path
from types import ModuleType

from bench import (
    agentdojo,
    chaos,
    dashboard,
    egress,
    fanout,
    history,
    loops,
    mcp,
    orchestration,
    parked,
    playbook_compile,
    throughput,
    tokens,
)
from bench.common import RESULTS_DIR, embedded_stack, log, serve_worker, write_result
from bench.report import render, write_markdown

__all__ = ["main", "render"]  # render: the smoke tests draw a bench's section with it

BENCHES: dict[str, ModuleType] = {
    "orchestration": orchestration,
    "history": history,
    "tokens": tokens,
    "throughput": throughput,
    "parked": parked,
    "mcp": mcp,
    "loops": loops,
    "fanout": fanout,
    "dashboard": dashboard,
}


async def run_benches(names: list[str], size: str, out: Path) -> None:
    async with embedded_stack() as stack:
        for name in names:
            module = BENCHES[name]
            sizes = module.Sizes.smoke() if size == "smoke" else preset_sizes(module, size)
            log(f"{name}: {sizes}")
            load = [round(x, 2) for x in os.getloadavg()]
            report = await module.run(stack, sizes)
            path = write_result(name, {**report, "preset": size, "load_avg_at_start": load}, out)
            log(f"{name}: written to {path}")


def preset_sizes(module: ModuleType, size: str) -> object:
    preset = getattr(module.Sizes, size, None)
    return preset() if preset is not None else module.Sizes()


async def run_chaos(size: str, seed: int, out: Path) -> None:
    """The chaos run brings up its own stack of processes (its faults stop them)."""
    preset = getattr(chaos.Sizes, size, None)
    sizes = preset() if preset is not None else chaos.Sizes()
    log(f"chaos: {sizes}")
    load = [round(x, 2) for x in os.getloadavg()]
    report = await chaos.run(sizes, seed)
    path = write_result("chaos", {**report, "preset": size, "load_avg_at_start": load}, out)
    log(f"chaos: written to {path}")


async def run_egress(size: str, out: Path) -> None:
    sizes = egress.Sizes.quick() if size == "quick" else egress.Sizes()
    log(f"egress: {sizes}")
    load = [round(x, 2) for x in os.getloadavg()]
    report = await egress.run(sizes)
    path = write_result("egress", {**report, "preset": size, "load_avg_at_start": load}, out)
    log(f"egress: written to {path}")


async def run_agentdojo(size: str, args: argparse.Namespace) -> None:
    preset = {"quick": agentdojo.Sizes.quick, "smoke": agentdojo.Sizes.smoke}.get(size, agentdojo.Sizes)()
    if args.suite:
        preset.suites = tuple(args.suite)
    if args.profile:
        preset.profiles = tuple(args.profile)
    log(f"agentdojo: {preset}")
    load = [round(x, 2) for x in os.getloadavg()]
    async with embedded_stack() as stack:
        report = await agentdojo.run(stack, preset, args.model)
    path = write_result("agentdojo", {**report, "preset": size, "load_avg_at_start": load}, args.out)
    log(f"agentdojo: written to {path}")


def run_playbook_compile(size: str, out: Path) -> None:
    """No stack: the compiler alone, a fresh process per size."""
    sizes = {"quick": playbook_compile.Sizes.quick, "smoke": playbook_compile.Sizes.smoke}.get(
        size, playbook_compile.Sizes
    )()
    log(f"playbook_compile: {sizes}")
    load = [round(x, 2) for x in os.getloadavg()]
    report = {**playbook_compile.run(sizes), "preset": size, "load_avg_at_start": load}
    log(f"playbook_compile: written to {write_result('playbook_compile', report, out)}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    own_servers = ["agentdojo", "chaos", "egress", "playbook_compile"]  # run apart from `all`
    parser.add_argument("what", choices=["all", "report", "worker", *own_servers, *BENCHES])
    preset = parser.add_mutually_exclusive_group()
    preset.add_argument("--quick", action="store_true", help="smaller sizes (a few minutes in all)")
    preset.add_argument(
        "--full", action="store_true", help="the issue's sizes everywhere (5,000 parked tasks)"
    )
    preset.add_argument(
        "--smoke", action="store_true", help="tiny sizes: does every bench still run (figures meaningless)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where the JSON results go")
    parser.add_argument(
        "--seed", type=int, default=1, help="chaos: the faults' seed (same seed, same faults)"
    )
    parser.add_argument(
        "--suite", action="append", choices=agentdojo.suites.SUITES, help="agentdojo: only this suite"
    )
    parser.add_argument(
        "--profile", action="append", choices=agentdojo.profiles.PROFILES, help="agentdojo: only this profile"
    )
    parser.add_argument("--model", help="agentdojo: a real model (LiteLLM name) in place of the oracle")
    parser.add_argument("--worker-options", type=json.loads, default={}, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke and args.out == RESULTS_DIR:  # meaningless figures stay out of RESULTS.md
        args.out = Path(tempfile.mkdtemp(prefix="bench-smoke-"))
    if args.what == "worker":
        asyncio.run(serve_worker(args.worker_options))
        return
    if args.what == "chaos":
        size = "quick" if args.quick or args.smoke else "full" if args.full else "default"
        asyncio.run(run_chaos(size, args.seed, args.out))
    elif args.what == "egress":  # no stack: bubblewrap, the proxies and a local server
        asyncio.run(run_egress("quick" if args.quick or args.smoke else "default", args.out))
    elif args.what == "agentdojo":
        asyncio.run(run_agentdojo("quick" if args.quick else "smoke" if args.smoke else "default", args))
    elif args.what == "playbook_compile":
        run_playbook_compile("quick" if args.quick else "smoke" if args.smoke else "default", args.out)
    elif args.what != "report":
        names = list(BENCHES) if args.what == "all" else [args.what]
        size = "quick" if args.quick else "full" if args.full else "smoke" if args.smoke else "default"
        asyncio.run(run_benches(names, size, args.out))
    text = render(args.out)
    print(text)
    if args.out == RESULTS_DIR:
        write_markdown(text)


if __name__ == "__main__":
    main()
