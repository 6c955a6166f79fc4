"""Playbook compile time and memory against the number of steps: `python -m bench.playbook_compile
[--quick|--smoke]` (about half a minute; no stack, only the compiler).

A chain of N step files, each `after:` the one before and referencing its output and the
entry's (`{{ s00041.title }}`, `{{ s00000.title }}`), is compiled by `compile_playbooks` in a
fresh process per run, with the step limit and the compiled-size limit lifted there (the
playbook limits bound what may run; this measures the compiler, not the limits). Each run
reports the compile's wall time, its CPU time (the work itself, on a busy machine too), the
process's peak RSS (`VmHWM`, imports included) and what the compile added to it; the median
times and the highest peak of `repeats` runs are kept per size. Linear scaling shows as
time(largest) / time(smallest) near the ratio of the sizes (10 for 1,000 and 10,000 steps).
Target: 10,000 steps in under 2 s and 300 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.tables import table, verdict

NAME = "playbook_compile"
TARGET_STEPS, TARGET_S, TARGET_MB = 10_000, 2.0, 300.0
REGISTRY = "events:\n  Incident:\n    fields: {title: str}\n"


@dataclass
class Sizes:
    steps: tuple[int, ...] = (1_000, 2_000, 4_000, 10_000)
    repeats: int = 3

    @classmethod
    def quick(cls) -> Sizes:
        return cls(steps=(1_000, 10_000), repeats=1)

    @classmethod
    def smoke(cls) -> Sizes:
        return cls(steps=(20, 200), repeats=1)


def write_chain(root: Path, length: int) -> Path:
    """A playbooks folder holding one chain of `length` steps; its `chain/` folder."""
    steps = root / "chain"
    steps.mkdir(parents=True)
    (root / "registry.yaml").write_text(REGISTRY)
    entry = "---\non: Incident\nagent: coder\noutput: {title: str}\n---\nLook at {{ event.title }}.\n"
    (steps / "s00000.md").write_text(entry)
    for i in range(1, length):
        before = f"s{i - 1:05d}"
        front = f"after: {before}\nagent: coder\noutput: {{title: str}}"
        body = f"After {{{{ {before}.title }}}}, for {{{{ s00000.title }}}}.\n"
        (steps / f"s{i:05d}.md").write_text(f"---\n{front}\n---\n{body}")
    return steps


def _max_rss_mb() -> float:
    """This process's peak RSS. Linux's `VmHWM` is this program's own; `ru_maxrss` also counts
    the parent's size at the fork."""
    status = Path("/proc/self/status")
    if status.exists():
        line = next(line for line in status.read_text().splitlines() if line.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def compile_once(root: Path) -> dict[str, Any]:
    """In this process: compile `root` with the limits lifted, and what it cost."""
    from config.playbooks import compile_playbooks, limits  # after the baseline is measured

    limits.MAX_STEPS_PER_PLAYBOOK = sys.maxsize  # type: ignore[misc]
    limits.MAX_COMPILED_BYTES = sys.maxsize  # type: ignore[misc]
    before = _max_rss_mb()
    started, cpu = time.perf_counter(), time.process_time()
    report = compile_playbooks(root, {"coder"})
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = _max_rss_mb()
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_mb": round(peak, 1),
        "added_mb": round(peak - before, 1),
        "ok": report.ok,
        "errors": [str(problem) for problem in report.errors[:3]],
        "compiled_steps": sum(len(playbook.steps) for playbook in report.playbooks),
    }


def _measure(root: Path) -> dict[str, Any]:
    """One compile in a fresh process, so each peak is that compile's own."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.playbook_compile", "--one", str(root)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def run(sizes: Sizes) -> dict[str, Any]:
    runs: dict[str, dict[str, Any]] = {}
    for length in sizes.steps:
        with tempfile.TemporaryDirectory(prefix="bench-playbooks-") as tmp:
            root = Path(tmp) / "playbooks"
            write_chain(root, length)
            measured = [_measure(root) for _ in range(sizes.repeats)]
        wrong = [m for m in measured if not m["ok"] or m["compiled_steps"] != length]
        if wrong:
            raise RuntimeError(f"the {length}-step chain did not compile: {wrong[0]}")
        runs[str(length)] = {
            "seconds": round(statistics.median(m["seconds"] for m in measured), 3),
            "seconds_all": [round(m["seconds"], 3) for m in measured],
            "cpu_seconds": round(statistics.median(m["cpu_seconds"] for m in measured), 3),
            "peak_mb": max(m["peak_mb"] for m in measured),
            "added_mb": max(m["added_mb"] for m in measured),
        }
    small, large = str(min(sizes.steps)), str(max(sizes.steps))
    at_target = runs.get(str(TARGET_STEPS))
    return {
        "sizes": asdict(sizes),
        "runs": runs,
        "time_ratio": {
            "steps": f"{large}/{small}",
            "size_ratio": round(int(large) / int(small), 1),
            "time_ratio": round(runs[large]["seconds"] / max(runs[small]["seconds"], 1e-9), 2),
        },
        "targets": {}
        if at_target is None
        else {
            f"{TARGET_STEPS}_steps_under_{TARGET_S:g}s": at_target["seconds"] < TARGET_S,
            f"{TARGET_STEPS}_steps_under_{TARGET_MB:g}MB": at_target["peak_mb"] < TARGET_MB,
        },
    }


def render(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    ratio, targets = r["time_ratio"], r["targets"]
    rows = []
    at_target = r["runs"].get(str(TARGET_STEPS))
    if at_target is not None:
        rows.append(
            [
                f"playbook compile, {TARGET_STEPS:,}-step chain",
                f"{at_target['seconds']} s ({at_target['cpu_seconds']} s CPU), {at_target['peak_mb']:.0f} MB "
                f"peak; time x{ratio['time_ratio']} "
                f"for x{ratio['size_ratio']} steps",
                f"< {TARGET_S:g} s, < {TARGET_MB:g} MB",
                verdict(all(targets.values())),
            ]
        )
    detail = table(
        ["steps", "compile (s, median)", "runs (s)", "CPU (s)", "peak RSS (MB)", "added by the compile (MB)"],
        [
            [
                f"{int(n):,}",
                v["seconds"],
                ", ".join(map(str, v["seconds_all"])),
                v["cpu_seconds"],
                v["peak_mb"],
                v["added_mb"],
            ]
            for n, v in r["runs"].items()
        ],
    )
    return (
        rows,
        f"{detail}\n\ntime({ratio['steps']}) = x{ratio['time_ratio']} (x{ratio['size_ratio']} steps).",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.playbook_compile", description=__doc__.splitlines()[0]
    )
    preset = parser.add_mutually_exclusive_group()
    preset.add_argument("--quick", action="store_true", help="1,000 and 10,000 steps, once each")
    preset.add_argument("--smoke", action="store_true", help="tiny sizes: does the bench still run")
    preset.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # a child: compile this folder
    parser.add_argument("--out", type=Path, default=None, help="where the JSON result goes")
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(compile_once(args.one)))
        return
    size = "quick" if args.quick else "smoke" if args.smoke else "default"
    sizes = Sizes.quick() if args.quick else Sizes.smoke() if args.smoke else Sizes()
    load = [round(x, 2) for x in os.getloadavg()]
    report = run(sizes)
    from bench.common import RESULTS_DIR, write_result  # the stack's imports: not while measuring

    out = args.out or (Path(tempfile.mkdtemp(prefix="bench-smoke-")) if args.smoke else RESULTS_DIR)
    path = write_result(NAME, {**report, "preset": size, "load_avg_at_start": load}, out)
    rows, detail = render(json.loads(path.read_text()))
    print(
        table(["figure", "measured", "target", ""], rows) if rows else "",
        detail,
        f"written to {path}",
        sep="\n\n",
    )


if __name__ == "__main__":
    main()
