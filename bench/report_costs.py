"""The report's rows and detail for the benches of what a task costs: history, tokens, and
MCP tools against native ones."""

from __future__ import annotations

from typing import Any

from bench.tables import ms, table, verdict


def history(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
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


def tokens(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
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


def mcp(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    calls, ratio, t, lists = r["call_ms"], r["mcp_activity_over_native"], r["targets"], r["listing_ms"]
    counts, listing = r["listing_ratio_p50"]["servers"], r["listing_ratio_p50"]
    high, low = counts.split(" / ")
    fixes = r["fixes_over_native_p50"]
    rows = [
        [
            "MCP read step / native remote tool (github.get_issue)",
            f"{calls['mcp_activity']['p50']:.1f} / {calls['native']['p50']:.1f} ms: {ratio['p50']}x p50 "
            f"({ratio['p95']}x p95; {fixes['mcp_parts']}x with a connection per call, as before the cache)",
            "<= 1.2x",
            verdict(t["mcp_read_step_p50_within_1.2x_native"]),
        ],
        [
            f"MCP listing at task start, {counts} servers (p50)",
            f"{lists['as_built'][high]['p50']:.1f} / {lists['as_built'][low]['p50']:.1f} ms: "
            f"{listing['as_built']}x ({listing['sessions_only']}x listing afresh on open sessions, "
            f"{listing['uncached']}x uncached)",
            "<= 2x",
            verdict(t["listing_most_servers_p50_within_2x_one"]),
        ],
    ]
    steps = table(
        ["one read step, in-process", "p50 / p95 (ms)", "/ native p50", "samples"],
        [[k, ms(v), f"{v['p50'] / calls['native']['p50']:.2f}x", v["n"]] for k, v in calls.items()],
    )
    parts = table(
        ["part of the MCP read step (fresh connection)", "p50 / p95 (ms)"],
        [[k, ms(v)] for k, v in r["mcp_parts_ms"].items()],
    )
    cpu = r["listing_cpu_ms_per_listing"]
    listing_table = table(
        ["servers listed at once", "reuse", "p50 / p95 (ms)", "CPU ms: worker / the servers"],
        [
            [n, how, ms(v), f"{cpu[how][n]['worker']} / {cpu[how][n]['servers']}"]
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
