"""`openloop up` and `openloop status`: the embedded stack and the health of each part."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from config.settings import Settings

console = Console(emoji=False)


def register(app: typer.Typer) -> None:
    @app.command()
    def up(
        demo: bool = typer.Option(False, "--demo", help="Run a demo task once the stack is up."),
        trace_console: bool = typer.Option(False, "--trace-console", help="Print trace spans."),
    ) -> None:
        """Run everything on this machine: Temporal (+ Web UI), Postgres, the worker, HTTP."""
        from workers.up import run_stack

        if trace_console:
            os.environ["OPENLOOP_TRACE_CONSOLE"] = "1"
        settings = Settings.from_env()
        on_ready = None
        if demo:
            from surfaces.demo import run_demo

            def on_ready(stack: object) -> object:
                return asyncio.create_task(run_demo(stack, console))

        try:
            asyncio.run(run_stack(settings, console, on_ready))
        except (RuntimeError, TimeoutError, FileNotFoundError) as exc:
            console.print(f"[red]openloop up failed:[/] {escape(str(exc))}", soft_wrap=True)
            raise typer.Exit(1) from None

    @app.command()
    def status() -> None:
        """Report the health of each part of the stack."""
        settings = Settings.from_env()
        checks = asyncio.run(_health(settings))
        table = Table("part", "address", "health")
        for part, address, health in checks:
            table.add_row(part, address, health)
        console.print(table)
        if any(not health.startswith("ok") for _, _, health in checks):
            raise typer.Exit(1)


SLACK_INBOX_STALLED_SECONDS = 120


def _slack_inbox_health(conn: Any) -> str | None:
    """Slack events acked but not started yet; stalled when the oldest waits too long
    (the surfaces server is down, or cannot reach Temporal)."""
    row = conn.execute(
        "SELECT count(*), extract(epoch FROM now() - min(received_at)) FROM slack_inbox "
        "WHERE handled_at IS NULL"
    ).fetchone()
    waiting, oldest = int(row[0]), float(row[1] or 0)
    if waiting and oldest > SLACK_INBOX_STALLED_SECONDS:
        return f"stalled ({waiting} waiting, oldest {oldest:.0f} s)"
    return f"ok ({waiting} waiting)"


async def _health(settings: Settings) -> list[tuple[str, str, str]]:
    import httpx

    from workers.embedded import port_open

    results: list[tuple[str, str, str]] = []
    try:
        from surfaces.client import connect

        client = await connect(settings)
        await client.service_client.check_health()
        results.append(("temporal", settings.temporal_address, "ok"))
    except Exception as exc:  # noqa: BLE001 - a health report, never a traceback
        results.append(("temporal", settings.temporal_address, f"down ({type(exc).__name__})"))
    ui = f"127.0.0.1:{settings.temporal_ui_port}"
    results.append(
        (
            "web ui",
            f"http://{ui}",
            "ok" if port_open("127.0.0.1", settings.temporal_ui_port) else "down",
        )
    )
    if settings.database_url:
        try:
            import psycopg

            with psycopg.connect(settings.database_url, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
                inbox = _slack_inbox_health(conn)
            results.append(("postgres", _redact(settings.database_url), "ok"))
            if inbox is not None:
                results.append(("slack inbox", "slack_inbox table", inbox))
        except Exception as exc:  # noqa: BLE001
            results.append(("postgres", _redact(settings.database_url), f"down ({type(exc).__name__})"))
    else:
        results.append(("postgres", "-", "not configured (run `openloop up`)"))
    try:
        async with httpx.AsyncClient(timeout=3) as http:
            response = await http.get(f"http://{settings.http_address}/readyz")
        health = "ok" if response.status_code == 200 else f"not ready ({response.status_code})"
    except httpx.HTTPError as exc:
        health = f"down ({type(exc).__name__})"
    results.append(("http", f"http://{settings.http_address}", health))
    return results


def _redact(url: str) -> str:
    """Never print a password from a database URL."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        credentials, host = rest.rsplit("@", 1)
        user = credentials.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in credentials else url
    return url
