"""Loops written as the thu-nmrc toolkit's `openloop.json`, run end to end: the dev server,
Postgres, a loop worker and every command in bubblewrap, on a calculator tested with
`python -m unittest` as that toolkit's own example tests."""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
from pathlib import Path
from typing import Any

from temporalio.client import Client
from typer.testing import CliRunner

from config.loop_json import load_json_loop
from surfaces.cli.main import app
from tests.integration.loop_env import loop_world
from workflows.loop_types import LoopStatus, RoundVerdict, Step

CALC = """
    def add(a, b):
        return a + b


    def mean(values):
        if not values:
            raise ValueError("mean of no values")
        return sum(values) / (len(values) + 1)
"""
TESTS = """
    import unittest

    from calc import add, mean


    class TestCalc(unittest.TestCase):
        def test_add(self):
            self.assertEqual(add(2, 3), 5)

        def test_mean(self):
            self.assertEqual(mean([2, 4, 6]), 4)

        def test_mean_of_nothing(self):
            with self.assertRaises(ValueError):
                mean([])
"""
# The seed's example fix command passes the workspace inside a quoted task; this fixer
# checks it got the real path, then repairs mean().
FIXER = """
    import pathlib, sys

    workspace, task = sys.argv[2], sys.argv[4]
    assert pathlib.Path(workspace).resolve() == pathlib.Path.cwd().resolve(), workspace
    assert task == f"Fix the latest failure in {workspace}", task
    source = pathlib.Path("calc.py")
    source.write_text(source.read_text().replace("/ (len(values) + 1)", "/ len(values)"))
    print("fixer: mean() divides by len(values)")
"""
# A fixer that repairs mean() and breaks add() in one go, then repairs add(). Each edit
# changes the file's size: rounds a second apart must not run a stale calc.pyc (Python
# checks a cached module against the source's size and whole-second mtime).
CARELESS_FIXER = """
    import pathlib

    source = pathlib.Path("calc.py")
    text = source.read_text()
    if "(len(values) + 1)" in text:
        text = text.replace("/ (len(values) + 1)", "/ len(values)").replace("a + b", "a - b  # simpler")
    else:
        text = text.replace("a - b  # simpler", "a + b")
    source.write_text(text)
"""
BENCHMARK = """
    from calc import add, mean

    checks = [add(2, 3) == 5, mean([2, 4, 6]) == 4]
    print(f"score={sum(checks) / len(checks)}")
"""
FIX = "python fixer.py --workspace {project_root} --task 'Fix the latest failure in {workspace}'"
UNITTEST = "python -m unittest discover -s . -p 'test_*.py'"  # the seed's verify, as written


def _project(tmp_path: Path, **extra: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    files = {"calc.py": CALC, "test_calc.py": TESTS, "app.py": "from calc import add\nprint(add(2, 3))\n"}
    for name, text in {**files, **extra}.items():
        (project / name).write_text(textwrap.dedent(text).lstrip())
    return project


def _workspace(tmp_path: Path, config: dict[str, Any]) -> Path:
    """A toolkit workspace, `.openloop/demo/openloop.json`, repairing ../../project."""
    folder = tmp_path / ".openloop" / "demo"
    folder.mkdir(parents=True)
    (folder / "openloop.json").write_text(json.dumps(config, indent=2))
    return folder


async def test_an_openloop_json_workspace_runs_to_success_from_the_cli(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    project = _project(tmp_path, **{"fixer.py": FIXER, "benchmark.py": BENCHMARK})
    workspace = _workspace(
        tmp_path,
        {
            "version": 1,
            "mission": "Keep the calculator verified and above baseline.",
            "total_rounds": 4,
            "project_root": "../../project",
            "commands": {
                "play": "python app.py",
                "fix": FIX,
                "verify": UNITTEST,
            },
            "baseline": {
                "enabled": True,
                "command": "python benchmark.py",
                "metric_name": "score",
                "regex": "score=([0-9]+(?:\\.[0-9]+)?)",
                "value": 0.9,
                "direction": "greater_equal",
            },
            "limits": {
                "command_timeout_seconds": 60,
                "stall_timeout_seconds": 30,
                "max_consecutive_failures": 3,
            },
            "owner": "qa-team",
        },
    )
    async with loop_world(client, pg_url, tmp_path, project) as world:
        env = {
            "OPENLOOP_DATABASE_URL": pg_url,
            "OPENLOOP_TEMPORAL_ADDRESS": client.service_client.config.target_host,
            "OPENLOOP_TASK_QUEUE": world.settings.task_queue,
            "OPENLOOP_LOOP_TASK_QUEUE": world.settings.loop_task_queue,
            "COLUMNS": "200",
        }
        ran = await asyncio.to_thread(CliRunner().invoke, app, ["loops", "run", str(workspace)], env=env)
        started = re.search(r"started (loop-demo-[0-9a-f]{8})", ran.output)
        assert started is not None, ran.output
        reports = await world.reports(started.group(1))

    assert ran.exit_code == 0, ran.output
    assert "openloop.json:" in ran.output and "owner: has no meaning here" in ran.output  # warned, ran
    assert "SUCCESS" in ran.output
    first, second = reports
    assert first.failing_tests == ["test_calc.TestCalc.test_mean"] and first.verdict is RoundVerdict.FAILED
    assert second.fixed_tests == ["test_calc.TestCalc.test_mean"] and second.verdict is RoundVerdict.PASSED
    fix = next(c for c in second.commands if c.step is Step.FIX)
    assert fix.outcome.value == "passed", fix.tail
    assert "--task 'Fix the latest failure in /" in fix.command  # filled in inside its quotes
    assert second.metric == 1.0
    assert all(c.sandboxed for r in reports for c in r.commands)


async def test_a_unittest_regression_is_caught_by_test_id(
    client: Client, pg_url: str, tmp_path: Path
) -> None:
    project = _project(tmp_path, **{"fixer.py": CARELESS_FIXER})
    workspace = _workspace(
        tmp_path,
        {
            "version": 1,
            "mission": "Make the unittest suite pass without breaking anything.",
            "total_rounds": 5,
            "project_root": "../../project",
            "commands": {"fix": "python fixer.py", "verify": "python -m unittest -v"},
            "limits": {"command_timeout_seconds": 60, "stall_timeout_seconds": 30},
        },
    )
    spec, warnings = load_json_loop(workspace / "openloop.json")
    assert warnings == []
    async with loop_world(client, pg_url, tmp_path, project) as world:
        loop_id, result = await world.run(spec)
        reports = await world.reports(loop_id)

    assert result.status is LoopStatus.SUCCESS, result.reason
    assert [r.verdict for r in reports] == [RoundVerdict.FAILED, RoundVerdict.REGRESSING, RoundVerdict.PASSED]
    regressing = reports[1]
    assert regressing.fixed_tests == ["test_calc.TestCalc.test_mean"]
    assert regressing.broken_tests == ["test_calc.TestCalc.test_add"]
    assert regressing.note.startswith("broke test_calc.TestCalc.test_add")
    assert reports[2].fixed_tests == ["test_calc.TestCalc.test_add"]
    assert all(c.tests_ran == 3 for r in reports for c in r.commands if c.step is Step.VERIFY)
