"""The dashboard for the tests: tasks started so its lists show them (search attributes and a
description), sign-in with a login token as `openloop up` mints it, and sign-in through an
OpenID Connect provider (tests/fakes/oidc_provider.py), the "browser" following the redirects
by hand."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from activities.store.agents import apply_agent
from activities.store.db import get_pool
from activities.tools.catalog import specs_for
from config.loader import parse_agent
from surfaces.web.auth import login_token
from tests.fakes.oidc_provider import FakeOidcProvider
from tests.helpers import Handle
from tests.workflow.record_histories import ISSUES_YAML
from workflows import search
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskInput, TaskStatus

D = "/dashboard"
SLACK = "https://slack.com/user_id"  # the provider's claim holding a person's Slack user id


async def start_dashboard_task(
    client: Client, yaml_text: str, agent: str, channel: str, task_queue: str, prefix: str = "task-dash"
) -> Handle:
    """Start a task of the agent in `yaml_text`, renamed `agent`, with the search attributes
    and description the dashboard (and `openloop tasks`) list it by."""
    config = parse_agent(re.sub(r"\{name: \w+\}", f"{{name: {agent}}}", yaml_text, count=1))
    inp = TaskInput(
        task_id=f"{prefix}-{uuid.uuid4().hex[:10]}",
        agent=config,
        agent_version=1,
        context=SurfaceContext(surface="cli", channel=channel, user="U_BOB"),
        request="what did we decide about deploys?",
        tools=specs_for(config),
    )
    attributes = TypedSearchAttributes(
        [
            SearchAttributePair(search.AGENT, agent),
            SearchAttributePair(search.WORKSPACE, "default"),
            SearchAttributePair(search.CHANNEL, channel),
            SearchAttributePair(search.SURFACE, "cli"),
            SearchAttributePair(search.STATUS, TaskStatus.RUNNING.value),
        ]
    )
    return await client.start_workflow(
        AgentTaskWorkflow.run,
        inp,
        id=inp.task_id,
        task_queue=task_queue,
        search_attributes=attributes,
        memo={"description": f"{agent}: {inp.request}"},
    )


async def sign_in(http: httpx.AsyncClient, user: str, role: str) -> str:
    """Sign in (replacing any session) and return the session's CSRF token."""
    http.cookies.clear()
    token = login_token(http.app_settings, user, role)  # type: ignore[attr-defined]
    response = await http.get(f"{D}/login", params={"token": token})
    assert response.status_code == 303, response.text
    page = await http.get(f"{D}/approvals")
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match, page.text
    return match.group(1)


async def apply_triage_agent(pg_url: str, name: str, approvers: list[str]) -> None:
    """Apply the issues agent (record_histories' ISSUES_YAML) as `name`, approved by `approvers`."""
    yaml_text = ISSUES_YAML.replace("{name: triage}", f"{{name: {name}}}").replace(
        "approvers: [U_ALICE]", f"approvers: [{', '.join(approvers)}]"
    )
    await apply_agent(await get_pool(pg_url), parse_agent(yaml_text))


async def oidc_sign_in(
    web: httpx.AsyncClient, person: dict[str, Any], provider: FakeOidcProvider, **change: str
) -> httpx.Response:
    """Click "Sign in with …", let the provider sign `person` in, and come back.
    `change` alters the callback's query (a forged state) before the dashboard sees it."""
    web.cookies.clear()
    provider.person = person
    start = await web.get(f"{D}/oidc/start")
    assert start.status_code == 302, start.text
    sent = httpx.URL(start.headers["location"])
    assert sent.params["code_challenge_method"] == "S256" and sent.params["nonce"] and sent.params["state"]
    async with httpx.AsyncClient() as browser:
        at_provider = await browser.get(sent)
    assert at_provider.status_code == 302, at_provider.text
    back = httpx.URL(at_provider.headers["location"])
    assert back.path == f"{D}/oidc/callback"
    return await web.get(back.path, params={**dict(back.params), **change})
