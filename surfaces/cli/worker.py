"""`openloop worker | serve | setup | promote`: the production processes and their one-off steps.

Unlike `openloop up`, nothing here starts a database or a Temporal server: they run against
`OPENLOOP_TEMPORAL_ADDRESS` (with TLS / API key) and `OPENLOOP_DATABASE_URL`, as the
container image, the Kubernetes manifests and the compose file in deploy/ do.

- `worker`: one Temporal worker (workers/run.py); SIGTERM drains it.
- `serve`: the surfaces HTTP server (Slack, GitHub, /healthz, /readyz), no worker.
- `setup`: search attributes on the namespace, the memory-retention schedule and database
  migrations; run it once per release, before the new workers (the release Job does).
- `promote BUILD_ID`: make a worker deployment version current, so new tasks go to it.
Exit codes: 0 ok, 1 failed, 2 a required setting is missing.
"""

from __future__ import annotations

import asyncio
import logging
import os

import typer
from rich.console import Console

from config.settings import Settings
from surfaces.cli.errors import say

EXIT_FAILED = 1
EXIT_MISSING_SETTING = 2
_RECONNECT_SECONDS = 5.0
_PROMOTE_RETRY_SECONDS = 5.0


def _fail(message: str, code: int) -> typer.Exit:
    say(message)
    return typer.Exit(code)


def _log_to_stderr() -> None:
    logging.basicConfig(
        level=os.environ.get("OPENLOOP_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _production_settings() -> Settings:
    from workers.run import ConfigurationError, settings_from_env

    try:
        return settings_from_env()
    except ConfigurationError as exc:
        raise _fail(str(exc), EXIT_MISSING_SETTING) from None


def register(app: typer.Typer) -> None:
    @app.command()
    def worker(
        loops: bool = typer.Option(
            False, "--loops", help="Run a loop worker: hold repair-loop workspaces and run their commands."
        ),
    ) -> None:
        """Run one production worker against OPENLOOP_TEMPORAL_ADDRESS and OPENLOOP_DATABASE_URL.

        Tuning comes from the environment (see workers/options.py): concurrency limits,
        OPENLOOP_BUILD_ID for worker versioning, OPENLOOP_SHUTDOWN_GRACE_SECONDS,
        OPENLOOP_READY_FILE, mTLS files. SIGTERM lets in-flight activities finish first.
        """
        _log_to_stderr()
        settings = _production_settings()
        from workers.options import RunOptions, WorkerOptionsError
        from workers.run import StartupError, install_metrics, run_worker

        try:
            options = RunOptions.from_env()
        except WorkerOptionsError as exc:
            raise _fail(str(exc), EXIT_MISSING_SETTING) from None
        install_metrics()
        try:
            asyncio.run(run_worker(settings, options=options, loops=loops))
        except StartupError as exc:
            raise _fail(str(exc), EXIT_FAILED) from None

    @app.command()
    def serve() -> None:
        """Run the surfaces HTTP server alone (Slack, GitHub webhooks, /healthz, /readyz).

        Listens on OPENLOOP_HTTP_ADDRESS (0.0.0.0:8080 in the container image). /readyz
        answers 503 until Temporal and Postgres both answer.
        """
        _log_to_stderr()
        settings = _production_settings()
        asyncio.run(_serve(settings))

    @app.command()
    def setup(
        skip_search_attributes: bool = typer.Option(
            False,
            "--skip-search-attributes",
            help="Leave search attributes alone (Temporal Cloud: add them in the Cloud UI or tcld).",
        ),
        skip_migrations: bool = typer.Option(False, "--skip-migrations", help="Leave the database alone."),
    ) -> None:
        """Prepare a cluster for this release: search attributes, schedules, database migrations."""
        settings = Settings.from_env() if skip_migrations else _production_settings()
        console = Console(emoji=False, highlight=False)
        try:
            for line in asyncio.run(_setup(settings, not skip_search_attributes, not skip_migrations)):
                console.print(line, soft_wrap=True)
        except Exception as exc:  # noqa: BLE001 - one clear line, not a traceback, for a Job log
            raise _fail(f"setup failed: {type(exc).__name__}: {exc}", EXIT_FAILED) from None

    @app.command()
    def promote(
        build_id: str = typer.Argument(..., help="The build id (OPENLOOP_BUILD_ID) of the new workers."),
        deployment: str | None = typer.Option(
            None, "--deployment", help="Worker deployment (default: OPENLOOP_DEPLOYMENT_NAME or openloop)."
        ),
        wait: float = typer.Option(
            0, "--wait", help="Seconds to keep trying while the build's workers are not polling yet."
        ),
    ) -> None:
        """Route new tasks to the workers of BUILD_ID; tasks pinned to older builds stay there."""
        from workers.options import DEFAULT_DEPLOYMENT_NAME

        _log_to_stderr()
        name = deployment or os.environ.get("OPENLOOP_DEPLOYMENT_NAME") or DEFAULT_DEPLOYMENT_NAME
        settings = Settings.from_env()
        try:
            asyncio.run(_promote(settings, name, build_id, wait))
        except Exception as exc:  # noqa: BLE001
            raise _fail(f"promote failed: {type(exc).__name__}: {exc}", EXIT_FAILED) from None
        Console(emoji=False, highlight=False).print(f"{name}: new tasks now go to build {build_id}")


async def _setup(settings: Settings, search_attributes: bool, migrations: bool) -> list[str]:
    from activities.store.db import apply_migrations_async, close_pools
    from workers.options import connect_from_env
    from workers.schedules import ensure_retention_schedule
    from workers.setup import register_search_attributes

    lines: list[str] = []
    client = await connect_from_env(settings)
    if search_attributes:
        added = await register_search_attributes(client, settings.namespace)
        lines.append(
            f"search attributes on {settings.namespace}: "
            + (f"added {', '.join(added)}" if added else "all present")
        )
    schedule = await ensure_retention_schedule(client, settings.task_queue)
    lines.append(f"schedule {schedule}: in place on task queue {settings.task_queue}")
    if migrations:
        applied = await apply_migrations_async(settings.require_database_url())
        lines.append(f"migrations: {'applied ' + ', '.join(applied) if applied else 'up to date'}")
        await close_pools()
    return lines


async def _promote(settings: Settings, deployment: str, build_id: str, wait_seconds: float) -> None:
    from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
    from temporalio.service import RPCError

    from workers.options import connect_from_env

    client = await connect_from_env(settings)
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=settings.namespace,
        deployment_name=deployment,
        build_id=build_id,
        identity=client.identity,
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    while True:
        try:
            # Refused while no worker of the build has polled yet: it would route tasks to nobody.
            await client.workflow_service.set_worker_deployment_current_version(request)
            return
        except RPCError as exc:
            if loop.time() + _PROMOTE_RETRY_SECONDS > deadline:
                raise
            logging.getLogger("openloop.promote").info("not yet: %s", exc.message)
        await asyncio.sleep(_PROMOTE_RETRY_SECONDS)


async def _serve(settings: Settings) -> None:
    """uvicorn with the surfaces app; Temporal is (re)connected in the background so the
    process is live at once and /readyz says when it can take work."""
    import uvicorn

    from surfaces.app import create_app
    from workers.options import connect_from_env

    log = logging.getLogger("openloop.surfaces")
    app = create_app(settings, None)

    async def connect_in_background() -> None:
        while app.state.temporal is None:
            try:
                app.state.temporal = await connect_from_env(settings)
                log.info("connected to Temporal at %s", settings.temporal_address)
            except RuntimeError as exc:
                log.warning("Temporal not reachable yet: %s", exc)
                await asyncio.sleep(_RECONNECT_SECONDS)

    connecting = asyncio.create_task(connect_in_background())
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=settings.http_host,
            port=settings.http_port,
            lifespan="on",
            proxy_headers=True,
            forwarded_allow_ips="*",  # behind the cluster's ingress / load balancer
            log_level=os.environ.get("OPENLOOP_LOG_LEVEL", "info").lower(),
        )
    )
    try:
        await server.serve()  # handles SIGTERM: stops accepting, finishes open requests
    finally:
        connecting.cancel()
        from activities.store.db import close_pools

        await close_pools()
