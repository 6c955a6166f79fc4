"""The dashboard as an operator uses it, in a real headless Chromium (Debian's package, never a
downloaded browser) driven by Playwright, against the whole stack `openloop up` starts:
sign in with the link `up` printed, see a task waiting for approval, approve it from the
inbox, watch it finish on its page (server-sent events), and look at the spend and loops
pages; and sign in through an OpenID Connect provider. Screenshots go to the test's tmp dir.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.up_env import cli, start_up, stop

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
WAIT_MS = 60_000

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (scripts/test.sh installs it when run as root)"
)


def dashboard_link(log: Path, within: float = 30.0) -> str:
    """The one-time sign-in link `openloop up` printed."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        printed = log.read_text(errors="replace")
        found = re.search(r"Dashboard\s+(http://\S+/dashboard/login\?token=\S+)", printed)
        if found:
            return found.group(1)
        time.sleep(0.2)
    raise AssertionError(f"openloop up printed no dashboard link:\n{log.read_text(errors='replace')}")


def csp_refusals(context: Any) -> list[str]:
    """What the dashboard's Content-Security-Policy blocks in this browser (it must be nothing:
    the pages carry no inline script or style)."""
    refused: list[str] = []
    context.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    return refused


def test_sign_in_approve_from_the_inbox_watch_it_finish_and_see_spend(
    stack_env: dict[str, str],
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    log = tmp_path / "up.log"
    process = start_up(stack_env, log)
    try:
        link = dashboard_link(log)
        request = "Please remember the decision: we chose Postgres 16 for the ledger"
        asked = cli(stack_env, "ask", "helper", request)
        assert asked.returncode == 0, asked.stdout + asked.stderr
        task_id = next(line.split()[1] for line in asked.stdout.splitlines() if line.startswith("Task "))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
            context = browser.new_context()
            refused = csp_refusals(context)
            page = context.new_page()
            page.goto(link)
            expect(page.get_by_role("heading", name="Tasks")).to_be_visible(timeout=WAIT_MS)
            expect(page.get_by_text("cli:local (admin)")).to_be_visible()
            base = link.split("/dashboard/")[0] + "/dashboard"
            deadline = time.monotonic() + 60
            while page.get_by_role("link", name=task_id).count() == 0:  # visibility lags a little
                assert time.monotonic() < deadline, page.content()
                time.sleep(0.5)
                page.goto(f"{base}/tasks?status=WAITING_APPROVAL")
            page.screenshot(path=str(tmp_path / "tasks.png"), full_page=True)

            watching = context.new_page()  # the task's page, left open while someone approves
            watching.goto(f"{base}/tasks/{task_id}")
            expect(watching.locator("#task-status")).to_have_text("WAITING_APPROVAL", timeout=WAIT_MS)
            watching.screenshot(path=str(tmp_path / "task-waiting.png"), full_page=True)

            page.goto(f"{base}/approvals")
            card = page.locator("article.approval", has_text=task_id)
            expect(card).to_contain_text("memory.save", timeout=WAIT_MS)
            expect(card).to_contain_text("Postgres 16")
            page.screenshot(path=str(tmp_path / "inbox.png"), full_page=True)
            card.get_by_role("button", name="Approve").click()
            expect(page.locator(".verdict.counted")).to_contain_text("Approved by cli:local", timeout=WAIT_MS)
            page.screenshot(path=str(tmp_path / "approved.png"), full_page=True)

            # The open task page follows the task over server-sent events, without a reload.
            expect(watching.locator("#task-status")).to_have_text("SUCCESS", timeout=WAIT_MS)
            expect(watching.locator("table.timeline")).to_contain_text("memory.save")
            watching.screenshot(path=str(tmp_path / "task-finished.png"), full_page=True)

            page.goto(f"{base}/spend")
            expect(page.get_by_role("heading", name=re.compile(r"^Spend, "))).to_be_visible()
            expect(page.locator("svg.chart")).to_be_visible()
            expect(page.locator("main")).to_contain_text("helper")
            page.screenshot(path=str(tmp_path / "spend.png"), full_page=True)

            page.goto(f"{base}/loops")
            expect(page.get_by_role("heading", name="Loops")).to_be_visible()
            page.screenshot(path=str(tmp_path / "loops.png"), full_page=True)
            browser.close()
            assert refused == []
    finally:
        assert stop(process) == 0


def test_sign_in_with_an_openid_connect_provider(
    stack_env: dict[str, str],
    tmp_path: Path,
) -> None:
    """The sign-in page's button, through a provider on 127.0.0.1 and back, as an admin."""
    from playwright.sync_api import expect, sync_playwright

    from tests.fakes.oidc_provider import FakeOidcProvider

    provider = FakeOidcProvider().start()
    provider.person = {"sub": "ops-1", "https://slack.com/user_id": "U_OPS"}
    env = {
        **stack_env,
        "OPENLOOP_OIDC_ISSUER": provider.issuer,
        "OPENLOOP_OIDC_CLIENT_ID": provider.client_id,
        "OPENLOOP_OIDC_CLIENT_SECRET": provider.client_secret,
        "OPENLOOP_OIDC_NAME": "Test IdP",
        "OPENLOOP_OIDC_ADMINS": "U_OPS",
    }
    process = start_up(env, tmp_path / "up.log")
    try:
        base = f"http://{env['OPENLOOP_HTTP_ADDRESS']}/dashboard"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
            page = browser.new_page()
            page.goto(f"{base}/tasks")  # signed out: the sign-in page
            expect(page.get_by_role("heading", name="Sign in")).to_be_visible(timeout=WAIT_MS)
            page.screenshot(path=str(tmp_path / "sign-in.png"), full_page=True)
            page.get_by_role("link", name="Sign in with Test IdP").click()
            expect(page.get_by_role("heading", name="Tasks")).to_be_visible(timeout=WAIT_MS)
            expect(page.get_by_text("U_OPS (admin)")).to_be_visible()
            page.screenshot(path=str(tmp_path / "signed-in-oidc.png"), full_page=True)
            browser.close()
        assert provider.token_requests and provider.token_requests[-1]["code_verifier"]
    finally:
        assert stop(process) == 0
        provider.stop()
