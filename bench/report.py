"""The bench report: each bench's figures against its target in one summary table, then a
section per bench, from the JSON results; written into bench/RESULTS.md between its
generated-section markers. Each bench's rows come from its renderer (`bench.report_*`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import egress, playbook_compile, report_costs, report_runs, report_steps
from bench.agentdojo import report as agentdojo_report
from bench.tables import table

Renderer = Callable[[dict[str, Any]], tuple[list[list[Any]], str]]

RESULTS_MD = Path(__file__).parent / "RESULTS.md"
BEGIN, END = "<!-- generated: begin -->", "<!-- generated: end -->"

# In the report's order: each bench's renderer and its section's title.
RENDER: dict[str, Renderer] = {
    "orchestration": report_steps.orchestration,
    "throughput": report_steps.throughput,
    "parked": report_steps.parked,
    "history": report_costs.history,
    "tokens": report_costs.tokens,
    "mcp": report_costs.mcp,
    "loops": report_runs.loops,
    "fanout": report_runs.fanout,
    "chaos": report_runs.chaos,
    "egress": egress.render,
    "playbook_compile": playbook_compile.render,
    "agentdojo": agentdojo_report.render,
}
TITLES = {
    "orchestration": "1. Orchestration overhead per step",
    "throughput": "2. Throughput",
    "parked": "3. Parked approvals",
    "history": "4. History cost",
    "tokens": "5. Token efficiency",
    "mcp": "7. MCP tools",
    "loops": "8. Repair loops",
    "fanout": "9. Fan-out to subagents",
    "chaos": "10. Chaos: deploys and crashes during a mixed workload",
    "egress": "11. Egress allowlist: the sandbox's proxies",
    "playbook_compile": "12. Playbook compile",
    "agentdojo": "13. Prompt-injection containment (AgentDojo)",
}


def render(out: Path) -> str:
    results = {n: json.loads((out / f"{n}.json").read_text()) for n in RENDER if (out / f"{n}.json").exists()}
    summary: list[list[Any]] = []
    sections = []
    for name in RENDER:
        if name not in results:
            continue
        r = results[name]
        rows, detail = RENDER[name](r)
        summary += rows
        sections.append(
            f"### {TITLES[name]}\n\nMeasured {r['measured_at']} ({r.get('preset', 'default')} sizes); "
            f"load average at start {r['load_avg_at_start']}; sizes {json.dumps(r['sizes'])}.\n\n{detail}"
        )
    if not results:
        return "No results yet: run `python -m bench all`."
    m = next(iter(results.values()))["machine"]
    head = (
        f"Machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['mem_gb']} GB RAM, Python {m['python']}; "
        "embedded stack (Temporal dev server in memory, PostgreSQL 16 + pgvector from pgserver)."
    )
    return "\n\n".join([head, table(["figure", "measured", "target", ""], summary), *sections])


def write_markdown(text: str) -> None:
    current = RESULTS_MD.read_text() if RESULTS_MD.exists() else f"# Bench results\n\n{BEGIN}\n{END}\n"
    if BEGIN not in current or END not in current:
        current += f"\n{BEGIN}\n{END}\n"
    before, rest = current.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    RESULTS_MD.write_text(f"{before}{BEGIN}\n{text}\n{END}{after}")
