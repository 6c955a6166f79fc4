"""Dashboard sessions live in Postgres, so they end when they should, everywhere: signing out
kills the cookie and every copy of it, on every app that shares the database;
`openloop dashboard revoke` ends a person's sessions, and signing in again ends the browser's
previous one; an approver removed from an agent's config loses approve power on their next
click, without signing in again. Every dashboard response carries the security headers, and
no page has inline script or style.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from config.settings import Settings
from surfaces.app import create_app
from surfaces.web.auth import COOKIE, login_token
from surfaces.web.headers import CONTENT_SECURITY_POLICY
from tests.fakes.oidc_provider import FakeOidcProvider
from tests.helpers import pending_approval
from tests.integration.dashboard_env import SLACK, D, apply_triage_agent, oidc_sign_in
from workflows.agent_task import AgentTaskWorkflow

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def browser(settings: Settings, client: Client) -> httpx.AsyncClient:
    """A browser talking to a fresh app (another replica) on the same Postgres."""
    app = create_app(settings, client)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dash.test")


@pytest.fixture
async def replicas(
    settings: Settings, client: Client
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    async with browser(settings, client) as one, browser(settings, client) as two:
        yield one, two


async def signed_in(http: httpx.AsyncClient, settings: Settings, user: str, role: str) -> tuple[str, str]:
    """Sign in with a one-time link in a fresh browser; the session cookie and its CSRF token."""
    http.cookies.clear()
    answer = await http.get(f"{D}/login", params={"token": login_token(settings, user, role)})
    assert answer.status_code == 303, answer.text
    page = await http.get(f"{D}/agents")
    assert page.status_code == 200 and f"{user} ({role})" in page.text
    return str(http.cookies.get(COOKIE)), CSRF.search(page.text).group(1)  # type: ignore[union-attr]


async def with_cookie(http: httpx.AsyncClient, cookie: str, path: str, **kwargs: Any) -> httpx.Response:
    """A request carrying `cookie` (a copy of someone's), nothing else."""
    http.cookies.clear()
    http.cookies.set(COOKIE, cookie, domain="dash.test", path=D)
    method = "POST" if "data" in kwargs else "GET"
    return await http.request(method, f"{D}{path}", **kwargs)


async def test_signing_out_kills_the_cookie_and_its_copies_on_every_replica(
    replicas: tuple[httpx.AsyncClient, httpx.AsyncClient], settings: Settings
) -> None:
    one, two = replicas
    user = f"U_SAM_{uuid.uuid4().hex[:6]}"
    cookie, csrf = await signed_in(one, settings, user, "admin")
    copied = await with_cookie(two, cookie, "/agents")  # the other replica knows the session
    assert copied.status_code == 200 and f"{user} (admin)" in copied.text

    out = await one.post(f"{D}/logout", data={"csrf": csrf})
    assert out.status_code == 200 and "Signed out." in out.text

    for http in (one, two):
        again = await with_cookie(http, cookie, "/tasks")
        assert again.status_code == 401 and "Sign in first." in again.text
        live = await with_cookie(http, cookie, "/tasks", headers={"HX-Request": "true"})
        assert live.status_code == 401 and live.text == "sign in first"
        forget = await with_cookie(http, cookie, "/memory/1/forget", data={"csrf": csrf})
        assert forget.status_code == 401  # a form posted with the old cookie and token: refused


def revoke(settings: Settings, pg_url: str, user: str) -> subprocess.CompletedProcess[str]:
    """`openloop dashboard revoke --as USER`, as an admin runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLOOP_")}
    env.update(OPENLOOP_STATE_DIR=str(settings.state_dir), OPENLOOP_DATABASE_URL=pg_url)
    command = [sys.executable, "-m", "surfaces.cli.main", "dashboard", "revoke", "--as", user]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


async def test_dashboard_revoke_ends_a_persons_sessions_at_once(
    replicas: tuple[httpx.AsyncClient, httpx.AsyncClient], settings: Settings, pg_url: str
) -> None:
    one, two = replicas
    user = f"U_DANA_{uuid.uuid4().hex[:6]}"
    first, _ = await signed_in(one, settings, user, "approver")
    second, _ = await signed_in(two, settings, user, "approver")  # her laptop and her phone
    erin = f"U_ERIN_{uuid.uuid4().hex[:6]}"
    other, _ = await signed_in(one, settings, erin, "viewer")

    revoked = revoke(settings, pg_url, user)
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.strip() == f"Ended 2 dashboard sessions of {user}."

    assert (await with_cookie(one, first, "/agents")).status_code == 401
    assert (await with_cookie(two, second, "/agents")).status_code == 401
    assert (await with_cookie(two, other, "/agents")).status_code == 200  # nobody else's

    one.cookies.set(COOKIE, other, domain="dash.test", path=D)  # Erin signs in again, same browser
    again = await one.get(f"{D}/login", params={"token": login_token(settings, erin, "viewer")})
    assert again.status_code == 303 and (await with_cookie(two, other, "/agents")).status_code == 401


async def test_an_approver_removed_from_the_agent_loses_approve_power_on_the_next_click(
    web: httpx.AsyncClient,
    provider: FakeOidcProvider,
    waiting: Any,
    pg_url: str,
    suffix: str,
) -> None:
    handle, _ = waiting
    agent = f"triage-{suffix}"
    await apply_triage_agent(pg_url, agent, ["U_ALICE", f"carol-{suffix}"])
    carol = {"sub": "carol", SLACK: f"U_CAROL_{suffix}", "github_login": f"carol-{suffix}"}
    await oidc_sign_in(web, carol, provider)
    inbox = await web.get(f"{D}/approvals")
    assert f"U_CAROL_{suffix} (approver)" in inbox.text and handle.id in inbox.text
    pending = (await handle.query(AgentTaskWorkflow.status)).pending_approval
    assert pending is not None
    form = {
        "csrf": CSRF.search(inbox.text).group(1),  # type: ignore[union-attr]
        "request_id": pending.request_id,
        "action_id": pending.action_id,
        "decision": "approve",
    }

    await apply_triage_agent(pg_url, agent, ["U_ALICE"])  # demoted: the same session, the same cookie
    refused = await web.post(f"{D}/approvals/{handle.id}", data=form)
    assert refused.status_code == 403, refused.text
    assert "signed in as a viewer, who cannot approve" in refused.text
    assert f"U_CAROL_{suffix} (viewer)" in (await web.get(f"{D}/approvals")).text
    assert await pending_approval(handle) is not None  # nothing reached the task

    await apply_triage_agent(pg_url, agent, ["U_ALICE", f"carol-{suffix}"])  # and back, as promptly
    assert f"U_CAROL_{suffix} (approver)" in (await web.get(f"{D}/approvals")).text


PAGES = ("/login", "/tasks", "/approvals", "/spend", "/memory", "/agents", "/loops", "/playbooks")
INLINE = re.compile(r"<script(?![^>]*\ssrc=)[^>]*>|<style[\s>]|<[^>]+\s(?:style|on[a-z]+)=", re.I)


async def test_every_dashboard_response_carries_the_security_headers_and_no_inline_script(
    web: httpx.AsyncClient,
    settings: Settings,
) -> None:
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY and "unsafe" not in CONTENT_SECURITY_POLICY
    responses = [await web.get(f"{D}/login")]
    await signed_in(web, settings, f"U_FAY_{uuid.uuid4().hex[:6]}", "admin")
    for path in PAGES:
        page = await web.get(f"{D}{path}")
        assert page.status_code == 200, (path, page.text)
        assert INLINE.search(page.text) is None, (path, INLINE.search(page.text))
        responses.append(page)
    responses += [
        await web.get(f"{D}/static/live.js"),
        await web.get(f"{D}/tasks/no-such-task"),  # an error page
        await web.get(D),  # a redirect
        await web.post(f"{D}/logout", content=b"x" * (2 * 1024 * 1024)),  # a 413
    ]
    assert [r.status_code for r in responses[-3:]] == [404, 303, 413]
    for answer in responses:
        headers = answer.headers
        assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY, answer.url
        assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin"
    assert "content-security-policy" not in (await web.get("/healthz")).headers  # not a dashboard page
