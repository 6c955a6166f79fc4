"""The production worker process: one Temporal worker against a cluster, nothing embedded.

`openloop worker` and `python -m workers.run` run it (a Kubernetes pod, a compose service).
In order, it:

1. connects to Temporal (TLS, mTLS or API key from the environment) and Postgres, retrying
   for a while so a stack that starts all at once settles without crash loops;
2. applies pending migrations, or with OPENLOOP_APPLY_MIGRATIONS=false waits until the
   migration Job has applied every migration this code ships: new code never runs on an
   old schema;
3. runs the worker (concurrency limits and worker deployment versioning from
   `workers.options`) and reports readiness through `workers.probe` files once it polls;
4. on SIGTERM or SIGINT stops polling, lets in-flight activities finish within the grace
   period, and exits 0. Activities still running then are cancelled and Temporal retries
   them on another worker; a workflow cached here is replayed by whichever worker gets its
   next task. Nothing is lost and, because side effects carry idempotency keys, nothing
   is done twice.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import psycopg
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client

from activities.store.db import apply_migrations_async, close_pools, get_pool, pending_migrations
from config.settings import Settings
from workers.options import RunOptions, WorkerOptionsError, connect_from_env
from workers.probe import REFRESH_SECONDS, ReadinessFiles

log = logging.getLogger("openloop.worker")

STARTUP_TIMEOUT_SECONDS = 180.0  # how long to wait for Temporal, Postgres and the schema
_RETRY_MAX_DELAY_SECONDS = 10.0
_HEALTH_TIMEOUT_SECONDS = 5.0
_SIGNALS = (signal.SIGTERM, signal.SIGINT)

T = TypeVar("T")


class StartupError(RuntimeError):
    """The worker could not start, or stopped on a fatal error; the message says why."""


class ConfigurationError(StartupError):
    """A required setting is missing: nothing to retry, fix the environment."""


def settings_from_env() -> Settings:
    """Production settings: the database must be named explicitly, never found in a state dir."""
    if not os.environ.get("OPENLOOP_DATABASE_URL", "").strip():
        raise ConfigurationError(
            "OPENLOOP_DATABASE_URL is not set: a production worker needs a PostgreSQL with "
            "pgvector (e.g. postgresql://openloop:...@db:5432/openloop). "
            "To run everything on this machine instead, use `openloop up`."
        )
    return Settings.from_env()


async def run_worker(
    settings: Settings,
    *,
    options: RunOptions | None = None,
    ready_file: Path | None = None,
    shutdown_grace_seconds: float | None = None,
    stop: asyncio.Event | None = None,
    loops: bool = False,
) -> None:
    """Run until SIGTERM/SIGINT (or `stop` is set); raise StartupError if it cannot start.
    With `loops`, run a loop worker (workers.loops) instead of the ordinary worker."""
    # Imports every activity (LiteLLM included): kept off module load.
    from workers import worker as defaults
    from workers.loops import loop_workers

    options = options or RunOptions.from_env()
    grace = options.shutdown_grace_seconds if shutdown_grace_seconds is None else shutdown_grace_seconds
    files = ReadinessFiles(ready_file or options.ready_file)
    database_url = settings.require_database_url()
    stop = stop or asyncio.Event()
    _install_signal_handlers(stop)
    try:
        client = await _retry("Temporal", lambda: connect_from_env(settings), stop)
        await _prepare_schema(database_url, options.apply_migrations, stop)
        await report_model_keys(database_url)
        limits = options.limits
        activity_slots = _or(limits.max_concurrent_activities, defaults.MAX_CONCURRENT_ACTIVITIES)
        workers = loop_workers(client, settings) if loops else []
        worker = (
            workers.pop(0)
            if workers
            else defaults.build_worker(
                client,
                settings,
                max_concurrent_activities=activity_slots,
                max_concurrent_workflow_tasks=_or(
                    limits.max_concurrent_workflow_tasks, defaults.MAX_CONCURRENT_WORKFLOW_TASKS
                ),
                max_cached_workflows=_or(limits.max_cached_workflows, defaults.MAX_CACHED_WORKFLOWS),
                graceful_shutdown_timeout=timedelta(seconds=grace),
                deployment_config=options.versioning.deployment_config() if options.versioning else None,
            )
        )
        run = asyncio.create_task(worker.run(), name="temporal-worker")
        # A loop worker's second worker (its own queue) runs beside the first and stops with it.
        others = [asyncio.create_task(extra.run(), name="temporal-worker-extra") for extra in workers]
        while not worker.is_running:
            if run.done():
                error = run.exception()  # why it stopped, e.g. an unknown namespace
                raise StartupError(f"the worker could not start polling: {error}")
            await asyncio.sleep(0.05)
        version = options.versioning
        log.info(
            "worker ready: task queue %s, namespace %s at %s, %s, up to %d activities",
            worker.task_queue,
            settings.namespace,
            settings.temporal_address,
            f"build {version.deployment_name}/{version.build_id} ({version.behavior.name.lower()})"
            if version
            else "unversioned",
            activity_slots,
        )
        files.beat(ready=True)
        heartbeat = asyncio.create_task(_heartbeat(client, files), name="readiness")
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
        heartbeat.cancel()
        files.clear_ready()
        if run.done():  # a fatal worker error, not a stop we asked for
            stopping.cancel()
            raise StartupError(f"the worker stopped unexpectedly: {run.exception() or 'no error given'}")
        log.info(
            "stopping: no new tasks; in-flight activities get up to %gs to finish, the rest "
            "are handed back to Temporal for another worker",
            grace,
        )
        await asyncio.gather(worker.shutdown(), *(extra.shutdown() for extra in workers))
        await asyncio.gather(run, *others)
        log.info("worker stopped cleanly")
    except _Stopped:
        log.info("stopped before the worker started")
    except psycopg.Error as exc:
        raise StartupError(f"database error: {exc}") from exc
    finally:
        files.clear()
        _remove_signal_handlers()
        await close_pools()


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


class _Stopped(Exception):
    """A stop was requested while still starting."""


def _install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            log.warning("%s again: still finishing in-flight work", signal.Signals(signum).name)
            return
        log.info("%s received", signal.Signals(signum).name)
        stop.set()

    for signum in _SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)


def _remove_signal_handlers() -> None:
    loop = asyncio.get_running_loop()
    for signum in _SIGNALS:
        loop.remove_signal_handler(signum)


async def _retry(what: str, attempt: Callable[[], Awaitable[T]], stop: asyncio.Event) -> T:
    """`attempt()` until it works, the startup timeout passes, or a stop is requested."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STARTUP_TIMEOUT_SECONDS
    delay = 1.0
    while True:
        try:
            return await attempt()
        except (RuntimeError, OSError, psycopg.OperationalError) as exc:
            if loop.time() + delay > deadline:
                waited = f"{STARTUP_TIMEOUT_SECONDS:.0f}s"
                raise StartupError(f"{what} not reachable after {waited}: {exc}") from None
            log.warning("%s not reachable yet, retrying in %.0fs: %s", what, delay, exc)
        await _sleep_unless_stopped(delay, stop)
        delay = min(delay * 2, _RETRY_MAX_DELAY_SECONDS)


async def _sleep_unless_stopped(seconds: float, stop: asyncio.Event) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return
    raise _Stopped()


async def _prepare_schema(database_url: str, apply: bool, stop: asyncio.Event) -> None:
    if apply:
        applied = await _retry("PostgreSQL", lambda: apply_migrations_async(database_url), stop)
        log.info("migrations: %s", ", ".join(applied) if applied else "up to date")
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STARTUP_TIMEOUT_SECONDS
    while pending := await _retry("PostgreSQL", lambda: pending_migrations(database_url), stop):
        if loop.time() > deadline:
            raise StartupError(
                f"migrations {', '.join(pending)} are not applied: run the migration Job "
                "(`openloop setup`) for this release first"
            )
        log.warning("waiting for the migration Job to apply %s", ", ".join(pending))
        await _sleep_unless_stopped(5.0, stop)


async def report_model_keys(database_url: str) -> None:
    """Say which models the applied agents name have no key here; never stops the start."""
    from activities.llm.health import report_missing_keys

    try:
        await report_missing_keys(await get_pool(database_url))
    except Exception as exc:  # noqa: BLE001 - a report, not a precondition
        log.warning("could not check the agents' model keys: %s", exc)


async def _heartbeat(client: Client, files: ReadinessFiles) -> None:
    """Keep the ready file fresh while Temporal answers; drop it while it does not."""
    healthy = True
    while True:
        await asyncio.sleep(REFRESH_SECONDS)
        try:
            await client.workflow_service.get_system_info(
                GetSystemInfoRequest(), timeout=timedelta(seconds=_HEALTH_TIMEOUT_SECONDS)
            )
            ok = True
        except Exception as exc:  # noqa: BLE001 - a probe reports, it never crashes the worker
            ok = False
            if healthy:
                log.warning("Temporal not answering, not ready: %s", exc)
        if ok and not healthy:
            log.info("Temporal answering again, ready")
        healthy = ok
        files.beat(ready=ok)


def install_metrics() -> None:
    """Temporal's metrics runtime (Prometheus or OTLP, as the env says) before any client."""
    from workers.telemetry import install_metrics_runtime

    where = install_metrics_runtime()
    if where:
        log.info("%s", where)


def main() -> int:
    logging.basicConfig(
        level=os.environ.get("OPENLOOP_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetched at run time
    os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    try:
        settings = settings_from_env()
        options = RunOptions.from_env()
        install_metrics()
        asyncio.run(run_worker(settings, options=options))
    except (ConfigurationError, WorkerOptionsError) as exc:
        log.error("%s", exc)
        return 2
    except StartupError as exc:
        log.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
