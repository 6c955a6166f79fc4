"""Every command of `openloop --help`, read from the Typer app itself, given a wrong id, an
empty id and a finished task, against a running Temporal and Postgres, and against a stack
that is down: each answers in a line or two that says what to do, exits non-zero when it
could not do what was asked, and never prints a traceback. And `loops run` that loses the
stack while it follows says so once: no retry warnings from the Temporal client first.

The commands that serve until stopped (`up`, `worker`, `serve`, `slack socket`) are left out:
`test_openloop_up_failures` covers how `up` fails.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from typer.main import get_command
from typer.testing import CliRunner

from activities.tools.catalog import specs_for
from config.loader import parse_agent
from surfaces.cli.errors import serves
from surfaces.cli.main import app
from tests.integration.up_env import OPENLOOP
from tests.workflow.record_histories import ISSUES_YAML
from workers.embedded import TemporalDevServer, free_port
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskInput

MAX_LINES = 3  # what a failure may say: one line, wrapped at worst
USAGE_LINES = 8  # Typer's own usage error (a missing or invalid option): its box
BAD_IDS = ("nope", "")
REPORTS = {"status", "doctor"}  # a check per part is what they print, down or not


def every_command() -> Iterator[tuple[list[str], Any]]:
    """Each command's words (`loops diff`) and its click command, walked from the app."""

    def walk(command: Any, words: list[str]) -> Iterator[tuple[list[str], Any]]:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            yield words, command
            return
        for name, sub in subcommands.items():
            yield from walk(sub, [*words, name])

    for words, command in walk(get_command(app), []):
        if not serves(words):
            yield words, command


def takes_an_id(command: Any) -> bool:
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    return any(p.required or (p.name or "").endswith("_id") for p in arguments)


def argv(words: list[str], command: Any, value: str) -> list[str]:
    """The command with `value` for each argument and each required option."""
    line = list(words)
    for param in command.params:
        if param.param_type_name == "argument" and (param.required or (param.name or "").endswith("_id")):
            line.append(value)
        elif param.param_type_name == "option" and param.required:
            when = getattr(getattr(param, "type_descriptor", None), "annotation", None) is datetime
            line += [param.opts[0], "2026-01-01T00:00:00" if when else value]
    return line


def invoke(line: list[str], env: dict[str, str | None]) -> tuple[int, str, Any]:
    result = CliRunner().invoke(app, line, env=env)
    said = result.output
    try:
        said += result.stderr  # separate in some click versions, part of output in others
    except ValueError:
        pass
    return result.exit_code, said, result.exception


def problems(line: list[str], code: int, said: str, raised: Any, *, must_fail: bool) -> list[str]:
    found = []
    if raised is not None and not isinstance(raised, SystemExit):
        found.append(f"raised {type(raised).__name__}: {raised}")
    if "Traceback" in said:
        found.append("a traceback")
    lines = [text for text in said.splitlines() if text.strip()]
    usage = code == 2 and ("Usage:" in said or "─ Error ─" in said)
    if code != 0 and line[0] not in REPORTS and len(lines) > (USAGE_LINES if usage else MAX_LINES):
        found.append(f"{len(lines)} lines")
    if must_fail and code == 0:
        found.append("exit 0 for a bad id")
    shown = " ".join(repr(word) if not word or " " in word else word for word in line)
    return [f"openloop {shown} -> exit {code}, {problem}:\n{said}" for problem in found]


@pytest.fixture
def down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """A stack that is down: free ports, a state dir with no stack.json, no database."""
    monkeypatch.chdir(tmp_path)  # `loops init`, `playbooks init` write here
    return {
        "OPENLOOP_STATE_DIR": str(tmp_path / "state"),
        "OPENLOOP_TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",
        "OPENLOOP_TEMPORAL_UI_PORT": str(free_port()),
        "OPENLOOP_HTTP_ADDRESS": f"127.0.0.1:{free_port()}",
        "OPENLOOP_DATABASE_URL": None,
        "COLUMNS": "200",
    }


def test_against_a_stack_that_is_down_every_command_says_what_to_do_in_a_line(
    down: dict[str, str | None],
) -> None:
    found: list[str] = []
    ran = 0
    for words, command in every_command():
        for value in BAD_IDS if takes_an_id(command) else ("",):
            line = argv(words, command, value)
            code, said, raised = invoke(line, down)
            ran += 1
            found += problems(line, code, said, raised, must_fail=takes_an_id(command))
    assert ran > 50  # the walk found the commands
    assert not found, f"{len(found)} of {ran}:\n\n" + "\n\n".join(found)


async def test_with_the_stack_up_a_wrong_empty_or_finished_id_is_one_line(
    client: Client, dev_server: TemporalDevServer, pg_url: str, task_queue: str, tmp_path: Path
) -> None:
    config = parse_agent(ISSUES_YAML)
    inp = TaskInput(
        task_id=f"task-cli-errors-{uuid.uuid4().hex[:10]}",
        agent=config,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel="ops", user="U_BOB"),
        request="open an issue",
        tools=specs_for(config),
    )
    finished = await client.start_workflow(AgentTaskWorkflow.run, inp, id=inp.task_id, task_queue=task_queue)
    await finished.terminate("finished before the test asks about it")
    env: dict[str, str | None] = {
        "OPENLOOP_STATE_DIR": str(tmp_path / "state"),
        "OPENLOOP_TEMPORAL_ADDRESS": dev_server.address,
        "OPENLOOP_DATABASE_URL": pg_url,
        "OPENLOOP_HTTP_ADDRESS": f"127.0.0.1:{free_port()}",
        "OPENLOOP_TASK_QUEUE": task_queue,
        "COLUMNS": "200",
    }

    def sweep() -> tuple[int, list[str]]:
        found: list[str] = []
        ran = 0
        for words, command in every_command():
            if not takes_an_id(command):
                continue
            for value in (*BAD_IDS, finished.id):
                line = argv(words, command, value)
                code, said, raised = invoke(line, env)
                ran += 1
                found += problems(line, code, said, raised, must_fail=value in BAD_IDS)
        return ran, found

    ran, found = await asyncio.to_thread(sweep)
    assert ran > 60
    assert not found, "\n\n".join(found)


def test_loops_run_that_loses_the_stack_says_so_once(tmp_path: Path) -> None:
    temporal = TemporalDevServer(
        port=free_port(), ui_port=None, db_file=None, log_file=tmp_path / "temporal.log"
    )
    temporal.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLOOP_")}
    env.update(
        OPENLOOP_STATE_DIR=str(tmp_path / "state"),
        OPENLOOP_TEMPORAL_ADDRESS=temporal.address,
        OPENLOOP_TASK_QUEUE=f"nobody-{uuid.uuid4().hex[:8]}",  # no worker: the loop waits
        COLUMNS="200",
    )
    try:
        temporal.wait_healthy()
        made = subprocess.run(
            [*OPENLOOP, "loops", "init"], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert made.returncode == 0, made.stdout + made.stderr
        log = tmp_path / "run.log"
        with log.open("wb") as out:
            running = subprocess.Popen(
                [*OPENLOOP, "loops", "run", "loop.yaml"],
                env=env,
                cwd=tmp_path,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            for _ in range(600):
                if "started loop-" in log.read_text() or running.poll() is not None:
                    break
                time.sleep(0.1)
            assert "started loop-" in log.read_text(), log.read_text()
        finally:
            temporal.stop()  # the stack goes down while `loops run` follows the loop
        code = running.wait(120)
    finally:
        temporal.stop()  # once stopped, again is nothing
    said = log.read_text()
    lines = [line for line in said.splitlines() if line.strip()]
    assert code == 2, said
    assert "Traceback" not in said and "WARN" not in said and "tonic" not in said, said
    assert len(lines) == 2, said  # started …, then the one line
    assert lines[-1].startswith("error: lost Temporal at " + temporal.address), said
    assert "is the stack running?" in lines[-1]
