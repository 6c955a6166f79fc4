"""`/healthz` (the process is serving) and `/readyz` (Temporal and Postgres answer)."""

from __future__ import annotations

from fastapi import FastAPI, Response


def register(app: FastAPI) -> None:
    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(response: Response) -> dict[str, object]:
        checks: dict[str, str] = {}
        client = app.state.temporal
        if client is None:
            checks["temporal"] = "not connected"
        else:
            try:
                await client.service_client.check_health()
                checks["temporal"] = "ok"
            except Exception as exc:  # noqa: BLE001 - report, never raise, from a probe
                checks["temporal"] = f"error: {type(exc).__name__}"
        settings = app.state.settings
        if settings.database_url:
            try:
                from activities.store.db import get_pool

                pool = await get_pool(settings.database_url)
                async with pool.connection() as conn:
                    await conn.execute("SELECT 1")
                checks["postgres"] = "ok"
            except Exception as exc:  # noqa: BLE001
                checks["postgres"] = f"error: {type(exc).__name__}"
        else:
            checks["postgres"] = "not configured"
        ready = all(value == "ok" for value in checks.values())
        response.status_code = 200 if ready else 503
        return {"ready": ready, "checks": checks}
