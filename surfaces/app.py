"""The surfaces server: one ASGI app (FastAPI) that Slack, GitHub and operators talk to.

Each surface exposes `register(app)`; handlers only validate, start or signal workflows,
and acknowledge. No agent logic runs here.
"""

from __future__ import annotations

from fastapi import FastAPI
from temporalio.client import Client

from config.settings import Settings


def create_app(settings: Settings, client: Client | None) -> FastAPI:
    app = FastAPI(title="OpenLoop surfaces", version="0.1.0")
    app.state.settings = settings
    app.state.temporal = client

    from surfaces import health

    health.register(app)
    for module_name in ("surfaces.slack.events", "surfaces.github.webhooks", "surfaces.ledger"):
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
