"""What every dashboard page uses: the templates and their filters, the Temporal client and
the database pool of the app, and masking of secret-looking values before anything is shown.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse
from psycopg_pool import AsyncConnectionPool
from starlette.templating import Jinja2Templates
from temporalio.client import Client

from activities.store.db import get_pool
from surfaces.web.auth import PREFIX, Person

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=str(HERE / "templates"))

MASK = "***"
_SECRET_KEY_HINTS = ("token", "secret", "password", "passwd", "authorization", "cookie", "api_key")
_TOKEN_VALUE = re.compile(
    r"(xox[abposr]-[\w-]{6,}|gh[pousr]_\w{12,}|github_pat_\w{12,}|sk-[\w-]{12,}|Bearer\s+\S{8,})"
)


def masked(value: Any) -> Any:
    """`value` with secret-looking keys and token-shaped strings replaced by ***."""
    if isinstance(value, dict):
        return {
            str(k): MASK if any(h in str(k).lower() for h in _SECRET_KEY_HINTS) else masked(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [masked(v) for v in value]
    if isinstance(value, str):
        return _TOKEN_VALUE.sub(MASK, value)
    return value


def usd(value: float | None, places: int = 4) -> str:
    return "–" if value is None else f"${value:,.{places}f}"


def age(at: datetime | str | None, now: datetime | None = None) -> str:
    """How long ago (or, for a future time, how long until): 5s, 3m, 2h, 4d."""
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at)
        except ValueError:
            return str(at)
    if at is None:
        return "–"
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    seconds = abs(((now or datetime.now(UTC)) - at).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def when(at: datetime | str | None) -> str:
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at)
        except ValueError:
            return str(at)
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if at else "–"


def pretty(value: Any) -> str:
    return json.dumps(masked(value), indent=2, sort_keys=True, ensure_ascii=False, default=str)


templates.env.filters.update(usd=usd, age=age, when=when, pretty=pretty, urlquote=lambda v: quote(v, safe=""))
templates.env.globals["prefix"] = PREFIX


def render(
    request: Request, name: str, who: Person | None, status_code: int = 200, **context: Any
) -> HTMLResponse:
    """A page (or, for an htmx request, the same template's fragment when it has one)."""
    context.update(me=who, htmx=request.headers.get("hx-request") == "true")
    return templates.TemplateResponse(request, name, context, status_code=status_code)


def temporal(request: Request) -> Client:
    client: Client | None = request.app.state.temporal
    if client is None:
        raise HTTPException(503, "Temporal is not connected: start the stack with `openloop up`")
    return client


async def pool(request: Request) -> AsyncConnectionPool:
    url = request.app.state.settings.database_url
    if not url:
        raise HTTPException(503, "no database configured (set OPENLOOP_DATABASE_URL)")
    return await get_pool(url)


def web_ui_link(request: Request, namespace: str, task_id: str) -> str:
    """The task in the Temporal Web UI (OPENLOOP_TEMPORAL_UI_URL overrides the local default)."""
    base = os.environ.get("OPENLOOP_TEMPORAL_UI_URL") or (
        f"http://localhost:{request.app.state.settings.temporal_ui_port}"
    )
    return f"{base.rstrip('/')}/namespaces/{quote(namespace)}/workflows/{quote(task_id, safe='')}"
