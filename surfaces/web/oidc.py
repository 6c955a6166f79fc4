"""Dashboard sign-in through an OpenID Connect provider: "Sign in with Slack", or any other.

authlib's Starlette client does the protocol: discovery from the issuer's
`/.well-known/openid-configuration`, the authorization code flow with state, nonce and PKCE
(S256), the code exchanged at the token endpoint, and the ID token's signature checked
against the provider's JWKS along with its issuer, audience, expiry and nonce. Between the
redirect to the provider and the callback, the flow's state, nonce and code verifier live in
a short-lived cookie signed with the dashboard secret (authlib keeps them in a "session";
that cookie is the session), so a callback counts only in the browser that started it, once.

The ID token's claims become the identities agent configs name as approvers: the Slack user
id (`https://slack.com/user_id` with Sign in with Slack), the GitHub login when a claim is
configured for it, and a verified email. The role follows at sign-in: admin for identities
in the admins list, approver when an applied agent names one of them (deciding still only
for the agents that do), viewer otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from authlib.integrations.starlette_client import OAuth, OAuthError
from fastapi import HTTPException, Request
from fastapi.responses import Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from joserfc.errors import JoseError

from activities.store.agents import latest_agents
from activities.store.db import get_pool
from config.settings import OidcSettings, Settings
from surfaces.web.auth import (
    PREFIX,
    Person,
    Role,
    RoleRule,
    dashboard_base,
    dashboard_secret,
    secure_cookies,
    signed_in,
)
from workflows import policy

FLOW_COOKIE = "openloop_oidc"
FLOW_SECONDS = 600  # from the redirect to the provider until its answer comes back
CALLBACK_PATH = "/oidc/callback"


def configured(settings: Settings) -> OidcSettings | None:
    return settings.oidc


def _flows(settings: Settings) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(dashboard_secret(settings), salt="openloop.dashboard.oidc")


def callback_url(request: Request) -> str:
    """Registered with the provider as the redirect URI."""
    settings: Settings = request.app.state.settings
    if settings.dashboard_url:
        return dashboard_base(settings) + CALLBACK_PATH
    return str(request.base_url).rstrip("/") + PREFIX + CALLBACK_PATH


async def _provider(request: Request) -> Any:
    """authlib's client for the provider, its discovery document loaded and checked once."""
    ready = getattr(request.app.state, "dashboard_oidc", None)
    if ready is not None:
        return ready
    oidc = configured(request.app.state.settings)
    if oidc is None:
        raise HTTPException(404, "OpenID Connect sign-in is not configured (OPENLOOP_OIDC_ISSUER)")
    if not oidc.client_id:
        raise HTTPException(503, "OpenID Connect sign-in needs OPENLOOP_OIDC_CLIENT_ID")
    client = OAuth().register(
        "oidc",
        client_id=oidc.client_id,
        client_secret=oidc.client_secret.get_secret_value() if oidc.client_secret else None,
        server_metadata_url=oidc.issuer.rstrip("/") + "/.well-known/openid-configuration",
        client_kwargs={"scope": oidc.scopes, "code_challenge_method": "S256"},
    )
    try:
        metadata = await client.load_server_metadata()
    except (httpx.HTTPError, ValueError) as exc:
        problem = f"the sign-in provider's discovery document could not be read ({exc})"
        raise HTTPException(502, problem) from None
    # OpenID Connect Discovery: the document must name the issuer it was fetched from.
    if str(metadata.get("issuer", "")).rstrip("/") != oidc.issuer.rstrip("/"):
        raise HTTPException(502, f"the provider's discovery document names another issuer than {oidc.issuer}")
    methods = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    if oidc.client_secret and "client_secret_basic" not in methods and "client_secret_post" in methods:
        client.client_kwargs["token_endpoint_auth_method"] = "client_secret_post"  # Slack's way
    request.app.state.dashboard_oidc = client
    return client


async def start(request: Request) -> Response:
    """Off to the provider, with the flow's state, nonce and PKCE verifier in a signed cookie."""
    client = await _provider(request)
    request.scope["session"] = {}
    response: Response = await client.authorize_redirect(request, callback_url(request))
    response.set_cookie(
        FLOW_COOKIE,
        _flows(request.app.state.settings).dumps(request.scope["session"]),
        max_age=FLOW_SECONDS,
        httponly=True,
        samesite="lax",  # the provider's redirect back is a top-level GET: the cookie comes along
        path=PREFIX,
        secure=secure_cookies(request),
    )
    return response


class Refused(Exception):
    """A sign-in the provider's answer does not support; the message says why."""


async def callback(request: Request) -> Response:
    """The provider's answer: check it, map the person, and start their session."""
    settings: Settings = request.app.state.settings
    client = await _provider(request)
    try:
        flow = _flows(settings).loads(request.cookies.get(FLOW_COOKIE, ""), max_age=FLOW_SECONDS)
    except BadSignature:
        flow = {}
    request.scope["session"] = flow if isinstance(flow, dict) else {}
    try:
        token = await client.authorize_access_token(request)
    except (OAuthError, JoseError, ValueError) as exc:
        raise Refused(f"{type(exc).__name__}: {exc}") from None
    except httpx.HTTPError as exc:
        raise Refused(f"the provider's token endpoint could not be reached ({type(exc).__name__})") from None
    claims = token.get("userinfo")
    if not claims:
        raise Refused("the provider answered without an ID token")
    oidc = configured(settings)
    assert oidc is not None
    names = identities(oidc, claims)
    role = await role_for(settings, oidc, names)
    found = Person(names[0], role, also=tuple(names[1:]))
    response = await signed_in(request, found, "oidc")
    response.delete_cookie(FLOW_COOKIE, path=PREFIX)
    return response


def identities(oidc: OidcSettings, claims: Mapping[str, Any]) -> list[str]:
    """The person's names, the one approvals are recorded under first: Slack user id, GitHub
    login, verified email; a provider that gives none of them still names its subject."""
    found = [claims.get(claim) for claim in (oidc.slack_claim, oidc.github_claim) if claim]
    if claims.get("email_verified") is True:
        found.append(claims.get("email"))
    names: list[str] = []
    for name in found:
        if isinstance(name, str) and name and name not in names:
            names.append(name)
    return names or [f"oidc:{claims.get('sub')}"]


async def role_for(settings: Settings, oidc: OidcSettings, names: list[str]) -> Role:
    if any(name in oidc.admins for name in names):
        return Role.ADMIN
    if settings.database_url:
        agents = await latest_agents(await get_pool(settings.database_url))
        if any(policy.may_approve(agent.config, name) for agent in agents for name in names):
            return Role.APPROVER
    return Role.VIEWER


def session_role(settings: Settings) -> RoleRule:
    """The role of an OIDC session now, from the person's names (`role_for`); None once OIDC
    sign-in is no longer configured."""

    async def derive(names: list[str]) -> Role | None:
        oidc = configured(settings)
        return await role_for(settings, oidc, names) if oidc is not None else None

    return derive
