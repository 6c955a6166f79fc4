"""The agent-runtime benches: `python -m bench all`, or one of orchestration, history,
tokens, throughput, parked, mcp, loops, fanout; `python -m bench report` redraws the tables from the
last JSON results.

Sizes: the default run takes about 22 minutes on 2 cores (1,000 tasks at once in the
throughput sweep, 1,000 parked tasks); `--quick` about 5 minutes; `--full` parks 5,000
tasks (the parked bench alone then takes about 25 minutes there).

Each bench runs on one embedded stack started for the run (Temporal dev server in memory,
PostgreSQL + pgvector, a fake GitHub), writes bench/results/<bench>.json, and the tables
are printed and written into bench/RESULTS.md between its generated-section markers.
Run it from the repository root, on a quiet machine (`uptime`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import fanout, history, loops, mcp, orchestration, parked, throughput, tokens
from bench.common import RESULTS_DIR, embedded_stack, log, serve_worker, write_result

BENCHES: dict[str, ModuleType] = {
    "orchestration": orchestration,
    "history": history,
    "tokens": tokens,
    "throughput": throughput,
    "parked": parked,
    "mcp": mcp,
    "loops": loops,
    "fanout": fanout,
}
RESULTS_MD = Path(__file__).parent / "RESULTS.md"
BEGIN, END = "<!-- generated: begin -->", "<!-- generated: end -->"


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table (also readable as plain text)."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), rule, *map(line, cells[1:])])


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


async def run_benches(names: list[str], size: str, out: Path) -> None:
    async with embedded_stack() as stack:
        for name in names:
            module = BENCHES[name]
            preset = getattr(module.Sizes, size, None)
            sizes = preset() if preset is not None else module.Sizes()
            log(f"{name}: {sizes}")
            load = [round(x, 2) for x in os.getloadavg()]
            report = await module.run(stack, sizes)
            path = write_result(name, {**report, "preset": size, "load_avg_at_start": load}, out)
            log(f"{name}: written to {path}")


def _ms(s: dict[str, Any]) -> str:
    return f"{s['p50']:.1f} / {s['p95']:.1f}"


def _share(slow: dict[str, Any]) -> str:
    share = slow.get("durable_overhead_share_p50")
    return "?" if share is None else f"{share:.1%}"


def _orchestration(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    ratios, slow, t = r["ratios"], r["slow_model"], r["targets"]
    durable = r.get("durable_part_ratios_p50", {})
    rows = [
        [
            "step: agent, local tool / floor (remote)",
            f"{ratios['p50']['agent_local_tool / floor_remote']}x p50, "
            f"{ratios['p95']['agent_local_tool / floor_remote']}x p95",
            "<= 1.3x",
            verdict(t["local_tool_step_p50_within_1.3x_floor"]),
        ],
        [
            "step: agent, remote tool / 2 floors",
            f"{ratios['p50']['agent_remote_tool / (2 x floor_remote)']}x p50, "
            f"{ratios['p95']['agent_remote_tool / (2 x floor_remote)']}x p95",
            "<= 1.3x",
            verdict(t["remote_tool_step_p50_within_1.3x_two_floors"]),
        ],
        [
            "what Temporal adds to a step (less the in-process step) / floors",
            f"{durable.get('agent_local_tool', '?')}x local tool, "
            f"{durable.get('agent_remote_tool', '?')}x remote tool",
            "(report)",
            "",
        ],
        [
            "overhead share with a 1 s model (less the in-process step's work)",
            f"{_share(slow['agent_local_tool'])} local tool, {_share(slow['agent_remote_tool'])} remote tool",
            "< 5%",
            verdict(t["overhead_share_at_1s_under_5pct"]),
        ],
        [
            "share of a 1 s-model step that is not the model",
            f"{slow['agent_local_tool']['overhead_share_p50']:.1%} local tool, "
            f"{slow['agent_remote_tool']['overhead_share_p50']:.1%} remote tool",
            "(report)",
            "",
        ],
    ]
    steps = table(
        ["variant", "step p50 / p95 (ms)", "samples"], [[k, _ms(v), v["n"]] for k, v in r["step_ms"].items()]
    )
    parts = table(
        ["part of an agent step (local tool), p50", "ms"],
        [[k, v] for k, v in r["agent_local_tool_step_parts_p50_ms"].items()],
    )
    body = r["model_body_real_vs_scripted_ms"]
    detail = (
        f"{steps}\n\n{parts}\n\nModel activity's own time (DB work), p50: scripted "
        f"{body['scripted']['p50']} ms, the real activity with offline/demo "
        f"{body['real_offline_demo']['p50']} ms. "
        f"Tool's own time p50 (in-process): local {r['tool_itself_ms']['local_tool']['p50']} ms, "
        f"remote {r['tool_itself_ms']['remote_tool']['p50']} ms. With a {slow['model_ms']:.0f} ms model: "
        f"step p50 {slow['agent_local_tool']['p50']} ms (local tool), {slow['agent_remote_tool']['p50']} ms "
        f"(remote tool)."
    )
    return rows, detail


def _throughput(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    rows, lines = [], []
    for workers, levels in r["by_workers"].items():
        figures = ", ".join(f"{lv['tasks_per_s']}/s at {lv['tasks']}" for lv in levels)
        rows.append([f"tasks/s, {workers} worker process(es)", figures, "(report)", ""])
        for lv in levels:
            lines.append(
                [
                    workers,
                    lv["tasks"],
                    lv["tasks_per_s"],
                    lv["steps_per_s"],
                    _ms(lv["task_latency_s"]),
                    lv["machine_cpu_busy"],
                    lv["all_succeeded"],
                ]
            )
    detail = table(
        [
            "workers",
            "tasks at once",
            "tasks/s",
            "steps/s",
            "task latency p50 / p95 (s)",
            "machine CPU busy",
            "all succeeded",
        ],
        lines,
    )
    return rows, f"{r['task']}.\n\n{detail}"


def _parked(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    rss, lat, t, sizes = r["rss_mb"], r["signal_to_tool_s"], r["targets"], r["sizes"]
    parked_rss = rss["parked"]
    rows = [
        [
            f"worker RSS, {sizes['tasks']} tasks parked (cache {sizes['max_cached']})",
            f"max {parked_rss['max_mb']} MB, {parked_rss.get('slope_mb_per_min', 0)} MB/min",
            "< 400 MB, flat",
            verdict(t["rss_while_parked_under_400mb"]),
        ],
        [
            f"approval -> tool ran, {lat['paced']['n']} paced at {sizes['paced_per_s']}/s",
            f"p50 {lat['paced']['p50']} s, p95 {lat['paced']['p95']} s",
            "p95 < 1 s",
            verdict(t["paced_signal_to_tool_p95_under_1s"]),
        ],
        [
            f"approvals of the other {lat['all_the_rest']['n']}, as fast as taken",
            f"{r['all_the_rest_per_s']}/s; p50 {lat['all_the_rest']['p50']} s, "
            f"p95 {lat['all_the_rest']['p95']} s with {sizes['approve_window']} in flight",
            "(report)",
            "",
        ],
    ]
    detail = table(
        ["phase", "RSS min / max / last (MB)", "slope (MB/min)"],
        [
            [p, f"{v['min_mb']} / {v['max_mb']} / {v['last_mb']}", v.get("slope_mb_per_min", "")]
            for p, v in rss.items()
        ],
    )
    latency = table(
        ["approvals", "n", "p50 (s)", "p95 (s)", "max (s)"],
        [[k, v["n"], v["p50"], v["p95"], v["max"]] for k, v in lat.items()],
    )
    timings = ", ".join(f"{k} {v}" for k, v in r["timings_s"].items())
    cpu = "; ".join(
        f"{phase}: " + ", ".join(f"{k} {v}" for k, v in parts.items())
        for phase, parts in r["cpu_ms_per_task"].items()
    )
    return rows, f"{detail}\n\n{latency}\n\nTimings (s): {timings}.\n\nCPU ms per task: {cpu}."


def _history(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    ratios, t, long, free = r["per_step_vs_floor_remote"], r["targets"], r["long_task"], r["uncapped_task"]
    rows = [
        [
            "history per agent step / floor step",
            ", ".join(f"{k}: {v['bytes']}x bytes, {v['events']}x events" for k, v in ratios.items()),
            "<= 2x",
            verdict(t["agent_step_bytes_within_2x_floor"] and t["agent_step_events_within_2x_floor"]),
        ],
        [
            "history grows linearly",
            f"bytes/step between sizes {r['per_step']['agent_local_tool']['bytes_slope_between_sizes']}",
            "constant",
            verdict(t["linear_history (slopes within 10%)"]),
        ],
        [
            f"{long['steps']}-step task",
            f"{long['status']}, {len(long['runs'])} runs of "
            f"{[x['model_calls'] for x in long['runs']]} model calls, max {long['max_run_events']} events / "
            f"{long['max_run_bytes']:,} bytes per run",
            "within limits",
            verdict(t["long_task_completed_within_limits"]),
        ],
    ]
    rows.append(
        [
            f"model activity's own time, first / last 10 calls of the {long['steps']}-step task",
            f"p50 {long['model_activity_ms_first_10']['p50']} / "
            f"{long['model_activity_ms_last_10']['p50']} ms",
            "(report)",
            "",
        ]
    )
    if free:
        first = free["runs"][0]
        rows.append(
            [
                "continue-as-new suggested by Temporal after",
                f"{first['model_calls']} model calls "
                f"({first['events']} events, {first['bytes']:,} bytes), {free['status']}",
                "(report)",
                "",
            ]
        )
    detail = table(
        ["kind", "events / step", "bytes / step", "bytes / step between sizes"],
        [[k, v["events"], v["bytes"], v["bytes_slope_between_sizes"]] for k, v in r["per_step"].items()],
    )
    parts = table(
        ["event type (agent, local tool)", "bytes / step"],
        list(r["per_step"]["agent_local_tool"]["bytes_by_event_type"].items()),
    )
    return rows, f"{detail}\n\n{parts}"


def _tokens(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    s = r["sessions"]
    rows = [
        [
            "prompt tokens, 40 tool calls, compacted / not",
            f"{s['default']['prompt_tokens_total']:,} / {s['none']['prompt_tokens_total']:,} = "
            f"{r['share_of_uncompacted']['default']:.0%} (with summaries too: "
            f"{r['share_of_uncompacted']['with_summary']:.0%})",
            "<= 40%",
            verdict(r["targets"]["default_compaction_at_most_40pct"]),
        ]
    ]
    detail = table(
        ["session", "keep tool results", "window", "model calls", "prompt tokens", "last call", "max call"],
        [
            [
                k,
                v["keep_tool_results"],
                v["context_window"],
                v["model_calls"],
                f"{v['prompt_tokens_total']:,}",
                v["prompt_tokens_last_call"],
                v["prompt_tokens_max_call"],
            ]
            for k, v in s.items()
        ],
    )
    return rows, f"Tool outputs average {s['none']['tool_output_chars_mean']} characters.\n\n{detail}"


def _mcp(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    calls, ratio, t, lists = r["call_ms"], r["mcp_activity_over_native"], r["targets"], r["listing_ms"]
    counts, listing = r["listing_ratio_p50"]["servers"], r["listing_ratio_p50"]
    high, low = counts.split(" / ")
    fixes = r["fixes_over_native_p50"]
    rows = [
        [
            "MCP read step / native remote tool (github.get_issue)",
            f"{calls['mcp_activity']['p50']:.1f} / {calls['native']['p50']:.1f} ms: {ratio['p50']}x p50 "
            f"({ratio['p95']}x p95; {fixes['mcp_activity_shared_tls']}x with one TLS context)",
            "<= 1.2x",
            verdict(t["mcp_read_step_p50_within_1.2x_native"]),
        ],
        [
            f"MCP listing at task start, {counts} servers (p50)",
            f"{lists['as_is'][high]['p50']:.1f} / {lists['as_is'][low]['p50']:.1f} ms: {listing['as_is']}x "
            f"({listing['shared_tls']}x with one TLS context)",
            "<= 2x",
            verdict(t["listing_most_servers_p50_within_2x_one"]),
        ],
    ]
    steps = table(
        ["one read step, in-process", "p50 / p95 (ms)", "/ native p50", "samples"],
        [[k, _ms(v), f"{v['p50'] / calls['native']['p50']:.2f}x", v["n"]] for k, v in calls.items()],
    )
    parts = table(
        ["part of the MCP read step (fresh connection)", "p50 / p95 (ms)"],
        [[k, _ms(v)] for k, v in r["mcp_parts_ms"].items()],
    )
    cpu = r["listing_cpu_ms_per_listing"]
    listing_table = table(
        ["servers listed at once", "HTTP clients", "p50 / p95 (ms)", "CPU ms: worker / the servers"],
        [
            [n, how, _ms(v), f"{cpu[how][n]['worker']} / {cpu[how][n]['servers']}"]
            for how, by_count in lists.items()
            for n, v in by_count.items()
        ],
    )
    requests = ", ".join(r["http_requests_per_gateway_call"])
    chars = r["output_chars"]
    return rows, (
        f"{steps}\n\n{parts}\n\nHTTP requests per call: {requests}. Outputs: native {chars['native']} "
        f"characters, MCP {chars['mcp']}.\n\n{listing_table}"
    )


def _loops(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    o, a, sizes = r["overhead"], r["reacquire"], r["sizes"]
    wall, per_round, again = o["wall_s"], o["per_round_ms"], a["seconds"]["acquire_with_diff"]
    rows = [
        [
            f"repair loop / shell script, {sizes['rounds']} rounds of 2 x {sizes['command_s']:g} s commands",
            f"{wall['loop']['median']} / {wall['shell']['median']} s: {o['loop_over_shell']['median']}x "
            f"median ({o['loop_over_shell']['min']}x min), {per_round['over_shell']:.0f} ms a round",
            "<= 1.1x",
            verdict(r["targets"]["loop_within_1.1x_shell"]),
        ],
        [
            "repair loop / the same commands each in its bwrap",
            f"{o['loop_over_shell_bwrap']['median']}x median, {per_round['over_shell_bwrap']:.0f} ms a round",
            "(report)",
            "",
        ],
        [
            f"re-acquire a {a['repo']['files_mb']:g} MB workspace (clone + stored diff)",
            f"{again['median']} s, {a['mb_per_s']['acquire_with_diff']} MB/s; diff apply "
            f"{a['diff_apply_ms']['median']} ms; in a loop {a['in_a_loop']['reacquire_s']} s",
            "(report)",
            "",
        ],
    ]
    runs = table(
        ["variant", "median (s)", "min (s)", "runs (s)"],
        [[k, v["median"], v["min"], v["runs"]] for k, v in wall.items()],
    )
    spent = table(
        ["where the loop's time goes (median run)", "s", "ms a round"],
        [[k, v, o["loop_time_per_round_ms"][k]] for k, v in o["loop_time_s_median"].items()],
    )
    acquire = table(
        ["re-acquire", "median (s)", "min (s)", "MB/s"],
        [[k, v["median"], v["min"], a["mb_per_s"][k]] for k, v in a["seconds"].items()],
    )
    lost = ", ".join(f"{k} {v}" for k, v in a["in_a_loop"].items())
    return rows, (
        f"{runs}\n\nbwrap per command: {o['bwrap_ms_per_command']} ms; the sandbox probe before each: "
        f"{o['sandbox_probe_ms']} ms.\n\n{spent}\n\nRepository: {a['repo']['files_mb']} MB of files, "
        f"a {a['repo']['pack_mb']} MB pack, a {a['repo']['diff_bytes']:,}-byte diff; served by "
        f"{a['served_by']}.\n\n{acquire}\n\nDiff load {a['diff_load_ms']['median']} ms, apply "
        f"{a['diff_apply_ms']['median']} ms (median). A loop whose workspace is lost in round 2: {lost}."
    )


def _fanout(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    wall, ratio, events, sizes = r["wall_s"], r["wall_over_one"], r["history_events"], r["sizes"]
    one = wall[min(wall, key=int)]["median"]
    rows = [
        [
            f"4 subagents / one ({sizes['steps']}-step subagents, {sizes['model_ms']:g} ms a model call)",
            f"{wall.get('4', {}).get('median', '?')} / {one} s: {ratio.get('4', '?')}x; "
            f"16: {ratio.get('16', '?')}x ({r['max_parallel']} at a time)",
            "<= 1.5x",
            verdict(r["targets"]["four_within_1.5x_one"]),
        ],
        [
            "history events per delegation",
            f"{events['parent_per_delegation']} in the parent's, "
            f"{events['subagent_median']} in the subagent's own",
            "(report)",
            "",
        ],
    ]
    detail = table(
        ["subagents", "wall median (s)", "/ one", "runs (s)", "parent's events"],
        [[n, v["median"], ratio[n], v["runs"], events["parent"][n]] for n, v in wall.items()],
    )
    return rows, detail


RENDER = {
    "orchestration": _orchestration,
    "throughput": _throughput,
    "parked": _parked,
    "history": _history,
    "tokens": _tokens,
    "mcp": _mcp,
    "loops": _loops,
    "fanout": _fanout,
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
}


def render(out: Path) -> str:
    results = {n: json.loads((out / f"{n}.json").read_text()) for n in RENDER if (out / f"{n}.json").exists()}
    summary: list[list[Any]] = []
    sections = []
    for name in ("orchestration", "throughput", "parked", "history", "tokens", "mcp", "loops", "fanout"):
        if name not in results:
            continue
        r = results[name]
        rows, detail = RENDER[name](r)
        summary += rows
        m = r["machine"]
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


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["all", "report", "worker", *BENCHES])
    preset = parser.add_mutually_exclusive_group()
    preset.add_argument("--quick", action="store_true", help="smaller sizes (a few minutes in all)")
    preset.add_argument(
        "--full", action="store_true", help="the issue's sizes everywhere (5,000 parked tasks)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where the JSON results go")
    parser.add_argument("--worker-options", type=json.loads, default={}, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.what == "worker":
        asyncio.run(serve_worker(args.worker_options))
        return
    if args.what != "report":
        names = list(BENCHES) if args.what == "all" else [args.what]
        size = "quick" if args.quick else "full" if args.full else "default"
        asyncio.run(run_benches(names, size, args.out))
    text = render(args.out)
    print(text)
    if args.out == RESULTS_DIR:
        write_markdown(text)


if __name__ == "__main__":
    main()
