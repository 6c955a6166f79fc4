"""The report's rows and detail for the benches of a step's cost and the load it takes:
orchestration overhead per step, throughput, parked approvals."""

from __future__ import annotations

from typing import Any

from bench.tables import ms, table, verdict


def _share(slow: dict[str, Any]) -> str:
    share = slow.get("durable_overhead_share_p50")
    return "?" if share is None else f"{share:.1%}"


def orchestration(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
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
        ["variant", "step p50 / p95 (ms)", "samples"], [[k, ms(v), v["n"]] for k, v in r["step_ms"].items()]
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


def throughput(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
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
                    ms(lv["task_latency_s"]),
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


def parked(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
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
