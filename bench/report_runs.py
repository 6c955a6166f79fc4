"""The report's rows and detail for the benches of longer runs: repair loops against a
shell script, and fan-out to subagents."""

from __future__ import annotations

from typing import Any

from bench.tables import table, verdict


def loops(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
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


def fanout(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
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


def chaos(r: dict[str, Any]) -> tuple[list[list[Any]], str]:
    faults = ", ".join(f"{n} {kind}" for kind, n in sorted(r["faults_by_kind"].items()))
    rows = [
        [
            f"chaos: {r['runs']} runs under {faults} (seed {r['seed']})",
            f"{r['outcomes_equal']}/{r['runs']} outcomes equal to the undisturbed run",
            "all",
            verdict(r["outcomes_equal"] == r["runs"]),
        ],
        [
            "chaos: duplicated side effects",
            r["duplicated_side_effects"],
            "0",
            verdict(r["duplicated_side_effects"] == 0),
        ],
        ["chaos: lost runs", r["lost_runs"], "0", verdict(r["lost_runs"] == 0)],
        [
            "chaos: longest stall after a fault; the run most delayed",
            f"{r['longest_stall_s']} s; {r['most_delayed_run_s']} s later than undisturbed",
            "(report)",
            "",
        ],
    ]
    faults_table = table(
        ["at (s)", "fault", "target", "back after (s)", "workload moved again after (s)"],
        [[f["at_s"], f["kind"], f["target"], f["took_s"], f["stall_s"]] for f in r["faults"]],
    )
    differing = "".join(f"\n- {key}: {value}" for key, value in r["differing"].items()) or " none"
    return rows, (
        f"{faults_table}\n\nWall time: {r['seconds']['undisturbed']} s undisturbed, "
        f"{r['seconds']['with_faults']} s with faults; {r['worker_restarts']} worker restarts; repair "
        f"loops completed (undisturbed, with faults): {r['loops_completed']}. Runs that differ:{differing}"
    )
