"""The Temporal Web UI of `openloop up`, as an operator uses it: a finished task is found by the
agent search attribute, in a real headless Chromium (Debian's package) driven by Playwright."""

from __future__ import annotations

import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest

from tests.integration.up_env import cli, start_up, stop

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (scripts/test.sh installs it when run as root)"
)


def test_a_finished_task_is_found_in_the_web_ui_by_agent(stack_env: dict[str, str], tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    process = start_up(stack_env, tmp_path / "up.log")
    try:
        asked = cli(stack_env, "ask", "helper", "hello from the browser test")
        assert asked.returncode == 0, asked.stdout + asked.stderr
        task_id = next(line.split()[1] for line in asked.stdout.splitlines() if line.startswith("Task "))
        query = urllib.parse.quote("OpenLoopAgent = 'helper'")
        url = (
            f"http://127.0.0.1:{stack_env['OPENLOOP_TEMPORAL_UI_PORT']}"
            f"/namespaces/default/workflows?query={query}"
        )
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
            page = browser.new_page()
            page.goto(url)
            page.get_by_text(task_id).first.wait_for(timeout=30_000)
            page.screenshot(path=str(tmp_path / "workflows.png"))
            page.goto(url.split("/workflows?")[0] + f"/workflows/{task_id}")
            page.get_by_text("openloop.AgentTask").first.wait_for(timeout=30_000)
            page.screenshot(path=str(tmp_path / "task.png"))
            browser.close()
    finally:
        assert stop(process) == 0


def test_the_ui_query_filters_out_other_agents(stack_env: dict[str, str], tmp_path: Path) -> None:
    """The same search attribute drives `temporal workflow list --query`, so the CLI agrees."""
    process = start_up(stack_env, tmp_path / "up.log")
    try:
        assert cli(stack_env, "ask", "helper", "hello").returncode == 0
        from workers.embedded import find_binary

        listed = subprocess.run(
            [
                find_binary("temporal"),
                "workflow",
                "list",
                "--address",
                stack_env["OPENLOOP_TEMPORAL_ADDRESS"],
                "--query",
                "OpenLoopAgent = 'dev-platform'",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert listed.returncode == 0, listed.stderr
        assert "task-cli-" not in listed.stdout
    finally:
        assert stop(process) == 0
