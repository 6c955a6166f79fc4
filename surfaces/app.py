"""The surfaces server: one ASGI app (FastAPI) that Slack, GitHub and operators talk to.

Each surface exposes `register(app)`; handlers only validate, record, start or signal
workflows, and acknowledge. No agent logic runs here, and no body is read unbounded
(`surfaces.limits`). A surface that does work after the ack (the Slack inbox) adds a
background runner (`surfaces.background`), which lives as long as the app's lifespan.
"""

from __future__ import annotations

from fastapi import FastAPI
from temporalio.client import Client

from config.settings import Settings
from config.surface_kinds import SURFACE_KINDS
from surfaces.background import run_background


def create_app(settings: Settings, client: Client | None) -> FastAPI:
    app = FastAPI(title="OpenLoop surfaces", version="0.1.0", lifespan=run_background)
    app.state.settings = settings
    app.state.temporal = client
    app.state.background = []

    from surfaces import health, limits, web

    limits.register(app)  # first, so the dashboard's security headers wrap its 413s too
    health.register(app)
    web.register(app)
    inboxes = [kind.inbox for kind in SURFACE_KINDS.values() if kind.inbox is not None]
    for module_name in (*inboxes, "surfaces.ledger", "surfaces.hooks"):
        _register_optional(app, module_name)
    return app


def _register_optional(app: FastAPI, module_name: str) -> None:
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            return
        raise
    module.register(app)
