"""Who is looking at the dashboard, and what they may do.

Sign-in, embedded default: `openloop up` prints a dashboard URL carrying a one-time login
token (`login_url`; `openloop dashboard link` mints one for someone else). The token is signed
with the dashboard secret, says who the person is and their role, expires, and is accepted
once: its nonce is recorded when used (in Postgres when the server has a database, so a
restart or another replica refuses it too). In production people sign in with an OpenID Connect provider
instead (`surfaces.web.oidc`). Either way the browser gets a session cookie holding only a
signed session id; the session itself is a row in Postgres (`surfaces.web.sessions`) read
on every request, so signing out (or `openloop dashboard revoke`) ends it at once on every
replica, copied cookies included. The CSRF token is derived from the session id; every form
posts it back (`require_csrf`), so another site cannot make a signed-in browser act.

A person has one identity shown and approvals are recorded under, and maybe other names
for the same person (`also`): someone signed in through OIDC is both their Slack user id and
their GitHub login, and agents may name either as an approver.

Roles, each including the ones before it:
- viewer: sees every page;
- approver: decides approvals, and only for agents whose config names them (the workflow
  checks the same rule, `workflows.policy.may_approve`);
- admin: also forgets memories.
A link's role is the one the admin who minted it chose (`openloop dashboard revoke --as ID`
takes it back); an OIDC session's role is derived again on every request (`derive_role`), so
a person removed from an agent's approvers or from the admins loses the role at once.

The secret comes from OPENLOOP_DASHBOARD_SECRET, else from `dashboard.secret` in the state
dir (created on first use, readable by its owner only), so `openloop up` and the server
share it. Nothing here logs or shows a token.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from urllib.parse import quote

from fastapi import HTTPException, Request
from fastapi.responses import RedirectResponse
from itsdangerous import BadSignature, URLSafeTimedSerializer

from activities.store.db import get_pool
from config.settings import Settings
from surfaces.web.sessions import SESSION_SECONDS, SessionRow, SessionStore


class Role(StrEnum):
    """What a person may do on the dashboard; each role may do what the ones before it may."""

    VIEWER = "viewer"
    APPROVER = "approver"
    ADMIN = "admin"


ROLES = tuple(role.value for role in Role)
COOKIE = "openloop_dashboard"
LOGIN_TOKEN_SECONDS = 24 * 3600  # `openloop up` may run long before someone opens the link
SECRET_ENV = "OPENLOOP_DASHBOARD_SECRET"
SECRET_FILE = "dashboard.secret"
PREFIX = "/dashboard"


@dataclass(frozen=True)
class Person:
    user: str  # the identity approvals name: a Slack user id, `cli:local`, an email
    role: Role
    csrf: str = ""  # set once the person has a session
    also: tuple[str, ...] = ()  # the same person's other identities (a GitHub login, an email)

    @property
    def ids(self) -> tuple[str, ...]:
        return (self.user, *self.also)

    def can(self, role: Role) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)


class NotSignedIn(Exception):
    """Raised by `person` when the request carries no valid session."""


def dashboard_secret(settings: Settings) -> str:
    configured = os.environ.get(SECRET_ENV)
    if configured:
        return configured
    path = Path(settings.state_dir) / SECRET_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process wrote it first
        return path.read_text().strip()
    with os.fdopen(fd, "w") as out:
        out.write(value)
    return value


def _serializer(secret: str, purpose: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret, salt=f"openloop.dashboard.{purpose}")


def login_token(settings: Settings, user: str, role: str = "admin", ttl_seconds: int | None = None) -> str:
    """A one-time token that signs `user` in with `role`, within `ttl_seconds` (at most a day)."""
    if role not in ROLES:
        raise ValueError(f"role {role!r}: one of {', '.join(ROLES)}")
    payload: dict[str, object] = {"user": user, "role": role, "nonce": secrets.token_urlsafe(12)}
    if ttl_seconds is not None:
        payload["exp"] = time.time() + ttl_seconds
    return str(_serializer(dashboard_secret(settings), "login").dumps(payload))


def dashboard_base(settings: Settings) -> str:
    """Where people open the dashboard: OPENLOOP_DASHBOARD_URL, else the local server."""
    return (settings.dashboard_url or f"http://{settings.http_address}{PREFIX}").rstrip("/")


def login_url(settings: Settings, user: str, role: str = "admin", ttl_seconds: int | None = None) -> str:
    token = login_token(settings, user, role, ttl_seconds)
    return f"{dashboard_base(settings)}/login?token={quote(token)}"


# An OIDC session's role now, from its names; None when such sessions no longer count.
RoleRule = Callable[[list[str]], Awaitable[Role | None]]


class Sessions:
    """Turns login tokens into sessions, and session cookies back into people."""

    def __init__(self, settings: Settings, derive_role: RoleRule | None = None):
        self._settings = settings
        self._serializers: tuple[URLSafeTimedSerializer, URLSafeTimedSerializer] | None = None
        self._secret = b""
        self._used: dict[str, float] = {}  # nonce -> when it may be forgotten
        self._store = SessionStore(settings.database_url)
        self._derive_role = derive_role

    def _pair(self) -> tuple[URLSafeTimedSerializer, URLSafeTimedSerializer]:
        """Read (or create) the secret on first use, not when the app is built."""
        if self._serializers is None:
            secret = dashboard_secret(self._settings)
            self._secret = secret.encode()
            self._serializers = (_serializer(secret, "login"), _serializer(secret, "session"))
        return self._serializers

    def redeem(self, token: str) -> Person | None:
        """The person a login token names, once in this process; None for a bad, expired or
        used token."""
        redeemed = self._redeem(token)
        return redeemed[0] if redeemed else None

    async def redeem_once(self, token: str) -> Person | None:
        """`redeem`, and once across processes too when there is a database."""
        redeemed = self._redeem(token)
        if redeemed is None:
            return None
        found, nonce = redeemed
        url = self._settings.database_url
        if url and not await _first_use(url, nonce, found.user):
            return None
        return found

    def _redeem(self, token: str) -> tuple[Person, str] | None:
        try:
            payload = self._pair()[0].loads(token, max_age=LOGIN_TOKEN_SECONDS)
        except BadSignature:
            return None
        now = time.time()
        self._used = {nonce: until for nonce, until in self._used.items() if until > now}
        nonce = str(payload.get("nonce", ""))
        if not nonce or nonce in self._used or payload.get("role") not in ROLES:
            return None
        if float(payload.get("exp", now)) < now:
            return None
        self._used[nonce] = now + LOGIN_TOKEN_SECONDS
        return Person(str(payload["user"]), Role(payload["role"])), nonce

    def _csrf(self, session_id: str) -> str:
        self._pair()
        return hmac.new(self._secret, f"csrf:{session_id}".encode(), hashlib.sha256).hexdigest()

    async def start(self, found: Person, source: str) -> tuple[str, Person]:
        """A new session for `found`: the cookie's value, and the person with their CSRF token."""
        session_id = await self._store.create(SessionRow(found.user, found.also, found.role, source))
        cookie = str(self._pair()[1].dumps({"sid": session_id}))
        return cookie, replace(found, csrf=self._csrf(session_id))

    def _session_id(self, cookie: str | None) -> str | None:
        if not cookie:
            return None
        try:
            data = self._pair()[1].loads(cookie, max_age=SESSION_SECONDS)
        except BadSignature:
            return None
        session_id = data.get("sid") if isinstance(data, dict) else None
        return session_id if isinstance(session_id, str) and session_id else None

    async def find(self, cookie: str | None) -> Person | None:
        """The person whose live session the cookie names; None for no, a forged, an expired
        or a revoked session."""
        session_id = self._session_id(cookie)
        row = await self._store.find(session_id) if session_id else None
        if session_id is None or row is None:
            return None
        role: str | None = row.role
        if row.source == "oidc":
            role = await self._derive_role(list(row.ids)) if self._derive_role else None
        if role not in ROLES:
            return None
        return Person(row.user, Role(role), self._csrf(session_id), row.also)

    async def end(self, cookie: str | None) -> None:
        """Revoke the cookie's session: the cookie, and any copy of it, signs in no more."""
        session_id = self._session_id(cookie)
        if session_id is not None:
            await self._store.revoke(session_id)


async def _first_use(database_url: str, nonce: str, user: str) -> bool:
    """Record a login token's nonce; False when it was recorded before (the link was used)."""
    async with (await get_pool(database_url)).connection() as conn:
        await conn.execute("DELETE FROM dashboard_used_links WHERE expires_at < now()")
        cursor = await conn.execute(
            "INSERT INTO dashboard_used_links (nonce, user_id, expires_at)"
            " VALUES (%s, %s, now() + make_interval(secs => %s))"
            " ON CONFLICT (nonce) DO NOTHING RETURNING nonce",
            (nonce, user, LOGIN_TOKEN_SECONDS),
        )
        return await cursor.fetchone() is not None


async def signed_in(request: Request, found: Person, source: str) -> RedirectResponse:
    """Off to the tasks page with a new session's cookie; the browser's previous session ends."""
    sessions: Sessions = request.app.state.dashboard_sessions
    await sessions.end(request.cookies.get(COOKIE))
    cookie, _ = await sessions.start(found, source)
    response = RedirectResponse(f"{PREFIX}/tasks", status_code=303)
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="lax",
        path=PREFIX,
        secure=secure_cookies(request),
    )
    return response


def secure_cookies(request: Request) -> bool:
    """HTTPS-only cookies when the dashboard is served over HTTPS, also behind a proxy that
    ends TLS (OPENLOOP_DASHBOARD_URL says https)."""
    public = request.app.state.settings.dashboard_url or ""
    return request.url.scheme == "https" or public.startswith("https://")


async def person(request: Request) -> Person:
    """The signed-in person (a FastAPI dependency); pages send others to sign in."""
    sessions: Sessions = request.app.state.dashboard_sessions
    found = await sessions.find(request.cookies.get(COOKIE))
    if found is None:
        raise NotSignedIn()
    return found


def require(found: Person, role: Role) -> None:
    if not found.can(role):
        raise HTTPException(403, f"this needs the {role} role; you are signed in as {found.role}")


async def require_csrf(request: Request, found: Person) -> dict[str, str]:
    """The posted form, once its CSRF token matches the session's; 403 otherwise."""
    form = await request.form()
    sent = str(form.get("csrf") or request.headers.get("x-csrf-token") or "")
    if not sent or not hmac.compare_digest(sent, found.csrf):
        raise HTTPException(403, "the form's CSRF token does not match your session; reload the page")
    return {key: str(value) for key, value in form.items()}
