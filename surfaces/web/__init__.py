"""The operator dashboard, served under /dashboard by the surfaces app: tasks (live while they
run), the approvals inbox, spend against budgets, agent memory, agent versions, repair loops
and playbooks.

Server-rendered (FastAPI + Jinja2), one stylesheet, htmx 2.0.11 (npm htmx.org, 0BSD,
vendored in static/) for in-place updates and `static/live.js` for a running task's
server-sent events; every page reads the same without JavaScript. Like every surface it only
reads projections and signals workflows; sign-in, roles and CSRF live in `surfaces.web.auth`,
single sign-on through an OpenID Connect provider in `surfaces.web.oidc`.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from surfaces.web import agents, approvals, evals, loops, memory, oidc, playbooks, spend, tasks
from surfaces.web.auth import COOKIE, PREFIX, NotSignedIn, Sessions, signed_in
from surfaces.web.auth import login_url as login_url
from surfaces.web.common import HERE, render
from surfaces.web.headers import SecurityHeaders

__all__ = ["login_url", "register"]


def register(app: FastAPI) -> None:
    app.state.dashboard_sessions = Sessions(app.state.settings, oidc.session_role(app.state.settings))
    app.mount(f"{PREFIX}/static", StaticFiles(directory=str(HERE / "static")), name="dashboard-static")
    router = APIRouter(prefix=PREFIX)
    router.add_api_route("/login", login, methods=["GET"], response_class=HTMLResponse)
    router.add_api_route("/logout", logout, methods=["POST"])
    router.add_api_route("/oidc/start", oidc.start, methods=["GET"])
    router.add_api_route(oidc.CALLBACK_PATH, oidc.callback, methods=["GET"])
    router.add_api_route("", home, methods=["GET"])
    for pages in (tasks, approvals, spend, memory, agents, loops, playbooks, evals):
        router.include_router(pages.router)
    app.include_router(router, include_in_schema=False)
    app.add_exception_handler(NotSignedIn, _sign_in_first)
    app.add_exception_handler(oidc.Refused, _oidc_refused)
    app.add_exception_handler(StarletteHTTPException, _error_page)
    app.add_middleware(SecurityHeaders)


async def home(request: Request) -> Response:
    return RedirectResponse(f"{PREFIX}/tasks", status_code=303)


def _login_page(request: Request, status_code: int = 200, message: str = "") -> Response:
    provider = oidc.configured(request.app.state.settings)
    return render(
        request,
        "login.html",
        None,
        status_code=status_code,
        message=message,
        provider=provider.name if provider else None,
    )


async def login(request: Request) -> Response:
    """The sign-in page, or a one-time link's token turned into a session."""
    if "token" not in request.query_params:
        return _login_page(request)
    sessions: Sessions = request.app.state.dashboard_sessions
    found = await sessions.redeem_once(request.query_params["token"])
    if found is None:
        return _login_page(
            request,
            401,
            "This sign-in link is not valid: it was already used, has expired, or was cut short. "
            "Restart `openloop up`, or ask an admin for `openloop dashboard link`.",
        )
    return await signed_in(request, found, "link")


async def logout(request: Request) -> Response:
    from surfaces.web.auth import person, require_csrf

    await require_csrf(request, await person(request))
    sessions: Sessions = request.app.state.dashboard_sessions
    await sessions.end(request.cookies.get(COOKIE))  # this cookie, and every copy, now count for nothing
    response = render(request, "message.html", None, message="Signed out.")
    response.delete_cookie(COOKIE, path=PREFIX)
    return response


async def _sign_in_first(request: Request, exc: Exception) -> Response:
    if request.headers.get("hx-request") == "true" or request.url.path.endswith("/events"):
        return Response("sign in first", status_code=401)
    return _login_page(request, 401, "Sign in first.")


async def _oidc_refused(request: Request, exc: Exception) -> Response:
    return _login_page(request, 401, f"Sign-in was refused: {exc}")


async def _error_page(request: Request, exc: Exception) -> Response:
    """Dashboard errors as a page (with what to do); every other surface keeps FastAPI's JSON."""
    assert isinstance(exc, StarletteHTTPException)
    if not request.url.path.startswith(PREFIX) or request.url.path.endswith("/events"):
        return await http_exception_handler(request, exc)
    sessions: Sessions = request.app.state.dashboard_sessions
    who = await sessions.find(request.cookies.get(COOKIE))
    return render(request, "message.html", who, status_code=exc.status_code, message=str(exc.detail))
