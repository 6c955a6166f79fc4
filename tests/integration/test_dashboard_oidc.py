"""Dashboard sign-in through OpenID Connect, against a small provider on 127.0.0.1.

The dashboard is the real surfaces app driven over ASGI; the provider (tests/fakes/
oidc_provider.py) is a real HTTP server that authlib discovers, sends the browser to, and
exchanges the code with. The "browser" here follows the redirects by hand: to the provider's
authorize endpoint over HTTP, and back to the dashboard's callback with the code and state.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from config.settings import OidcSettings, Settings
from surfaces.app import create_app
from surfaces.web.auth import COOKIE, Person
from tests.fakes.oidc_provider import FakeOidcProvider
from tests.integration.dashboard_env import SLACK, D, apply_triage_agent, oidc_sign_in
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import TaskStatus


async def session_of(web: httpx.AsyncClient) -> Person | None:
    return await web.dashboard_app.state.dashboard_sessions.find(web.cookies.get(COOKIE))  # type: ignore[attr-defined,no-any-return]


async def test_sign_in_with_the_provider_maps_identity_and_role(
    web: httpx.AsyncClient, provider: FakeOidcProvider, pg_url: str, suffix: str
) -> None:
    page = await web.get(f"{D}/login")
    assert page.status_code == 200 and f'href="{D}/oidc/start">Sign in with Test IdP<' in page.text
    assert "Sign in with Test IdP" in (await web.get(f"{D}/tasks")).text  # signed out: the login page

    slack_id = f"U_DANA_{suffix}"
    await apply_triage_agent(pg_url, f"oidc-{suffix}", [f"dana-{suffix}"])  # names her GitHub login
    person = {
        "sub": f"sub-{suffix}",
        SLACK: slack_id,
        "github_login": f"dana-{suffix}",
        "email": "dana@example.com",
        "email_verified": True,
    }
    answer = await oidc_sign_in(web, person, provider)
    assert answer.status_code == 303 and answer.headers["location"] == f"{D}/tasks", answer.text
    assert (await session_of(web)) == Person(
        slack_id,
        "approver",
        (await session_of(web)).csrf,
        (f"dana-{suffix}", "dana@example.com"),  # type: ignore[union-attr]
    )
    assert f"{slack_id} (approver)" in (await web.get(f"{D}/approvals")).text
    exchanged = provider.token_requests[-1]
    assert exchanged["client_secret"] == provider.client_secret  # client_secret_post, as discovered
    assert exchanged["code_verifier"] and exchanged["redirect_uri"] == f"http://dash.test{D}/oidc/callback"

    await oidc_sign_in(
        web, {"sub": "x", SLACK: f"U_ROOT_{suffix}", "github_login": f"root-{suffix}"}, provider
    )
    assert (await session_of(web)) is not None and (await session_of(web)).role == "admin"  # type: ignore[union-attr]
    await oidc_sign_in(
        web, {"sub": f"s-{suffix}", "email": "eve@example.com", "email_verified": False}, provider
    )
    assert (await session_of(web)) is not None and (await session_of(web)).ids == (f"oidc:s-{suffix}",)  # type: ignore[union-attr]
    assert (await session_of(web)).role == "viewer"  # type: ignore[union-attr]


@pytest.mark.parametrize("tamper", ["signature", "foreign_key", "audience", "nonce", "issuer", "expired"])
async def test_an_id_token_that_does_not_check_out_is_refused(
    web: httpx.AsyncClient, provider: FakeOidcProvider, tamper: str
) -> None:
    provider.tamper = tamper
    answer = await oidc_sign_in(web, {"sub": "mallory", SLACK: "U_MALLORY"}, provider)
    assert answer.status_code == 401 and "Sign-in was refused" in answer.text, answer.text
    assert (await session_of(web)) is None and provider.tamper is None  # the token was issued, then refused


async def test_a_forged_state_a_replayed_code_or_another_browser_is_refused(
    web: httpx.AsyncClient, provider: FakeOidcProvider
) -> None:
    forged = await oidc_sign_in(web, {"sub": "m", SLACK: "U_M"}, provider, state="forged-state")
    assert forged.status_code == 401 and "mismatching_state" in forged.text
    assert await session_of(web) is None

    web.cookies.clear()
    provider.person = {"sub": "m", SLACK: "U_M"}
    start = await web.get(f"{D}/oidc/start")
    async with httpx.AsyncClient() as browser:
        back = httpx.URL((await browser.get(start.headers["location"])).headers["location"])
    flow_cookie = dict(web.cookies)
    web.cookies.clear()  # the callback arrives in a browser that did not start the flow
    assert (await web.get(back.path, params=back.params)).status_code == 401
    assert await session_of(web) is None
    web.cookies.update(flow_cookie)
    assert (await web.get(back.path, params=back.params)).status_code == 303  # its own browser: fine
    web.cookies.clear()
    web.cookies.update(flow_cookie)  # the same answer again: the code was used
    assert (await web.get(back.path, params=back.params)).status_code == 401

    refused = await oidc_sign_in(web, {"sub": "m"}, provider, error="access_denied")
    assert refused.status_code == 401 and "access_denied" in refused.text


async def test_an_approver_signed_in_by_oidc_sees_only_their_agents_approvals(
    web: httpx.AsyncClient, provider: FakeOidcProvider, waiting: Any, pg_url: str, suffix: str
) -> None:
    handle, script = waiting
    await apply_triage_agent(pg_url, f"other-{suffix}", [f"U_BOB_{suffix}"])
    await apply_triage_agent(pg_url, f"triage-{suffix}", ["U_ALICE", f"carol-{suffix}"])

    await oidc_sign_in(web, {"sub": "bob", SLACK: f"U_BOB_{suffix}"}, provider)
    assert (await session_of(web)).role == "approver"  # type: ignore[union-attr]
    inbox = await web.get(f"{D}/approvals")
    assert handle.id not in inbox.text and "wait for other approvers" in inbox.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', inbox.text).group(1)  # type: ignore[union-attr]
    pending = (await handle.query(AgentTaskWorkflow.status)).pending_approval
    assert pending is not None
    form = {
        "csrf": csrf,
        "request_id": pending.request_id,
        "action_id": pending.action_id,
        "decision": "approve",
    }
    refused = await web.post(f"{D}/approvals/{handle.id}", data=form)
    assert refused.status_code == 403 and f"U_BOB_{suffix}" in refused.text

    # Carol's Slack id is named by no agent; her GitHub login is, so the request is hers.
    await oidc_sign_in(
        web, {"sub": "carol", SLACK: f"U_CAROL_{suffix}", "github_login": f"carol-{suffix}"}, provider
    )
    inbox = await web.get(f"{D}/approvals")
    assert handle.id in inbox.text and "Flaky deploy step" in inbox.text
    form["csrf"] = re.search(r'name="csrf" value="([^"]+)"', inbox.text).group(1)  # type: ignore[union-attr]
    # The inbox's form names the one of her names that may decide; the decision is sent as it.
    form["approver"] = re.search(r'name="approver" value="([^"]+)"', inbox.text).group(1)  # type: ignore[union-attr]
    assert form["approver"] == f"carol-{suffix}"
    counted = await web.post(f"{D}/approvals/{handle.id}", data=form)
    assert counted.status_code == 200 and f"Approved by carol-{suffix}" in counted.text, counted.text
    assert (await handle.result()).status == TaskStatus.SUCCESS
    ran = [call for call in script.tool_calls if call.tool == "github.create_issue"]
    assert ran and ran[-1].approval is not None and ran[-1].approval.approver == f"carol-{suffix}"


async def test_behind_a_public_https_address_the_redirect_uri_and_cookies_follow_it(
    settings: Settings, client: Client, provider: FakeOidcProvider
) -> None:
    oidc = OidcSettings(issuer=provider.issuer, client_id=provider.client_id)
    public = settings.model_copy(update={"oidc": oidc, "dashboard_url": "https://ops.example.com/dashboard/"})
    app = create_app(public, client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://10.0.0.7") as http:
        start = await http.get(f"{D}/oidc/start")
    assert start.status_code == 302, start.text
    sent = httpx.URL(start.headers["location"])
    assert sent.params["redirect_uri"] == "https://ops.example.com/dashboard/oidc/callback"
    assert sent.params["client_id"] == provider.client_id and "openid" in sent.params["scope"].split()
    cookie = start.headers["set-cookie"].lower()
    assert (
        "openloop_oidc=" in cookie
        and "secure" in cookie
        and "httponly" in cookie
        and "samesite=lax" in cookie
    )

    unconfigured = create_app(settings, client)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=unconfigured), base_url="http://dash.test"
    ) as http:
        assert (await http.get(f"{D}/oidc/start")).status_code == 404
        assert "Sign in with" not in (await http.get(f"{D}/login")).text
