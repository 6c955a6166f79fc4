"""POST /github/webhook: verify, deduplicate, then start or signal a task. Nothing more.

GitHub waits 10 s for an answer, so the handler only checks the signature, parses the
payload (at most 25 MiB, GitHub's own cap: `surfaces.limits`), remembers the delivery in
Postgres and starts (or signals) a workflow. The workflow id derives from X-GitHub-Delivery,
and deliveries are remembered in `github_deliveries`, so a redelivery — even weeks later,
after Temporal forgot the workflow id — starts nothing new.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from activities.github.once import fetch_row
from activities.store.agents import StoredAgent, agent_for_github_repo
from activities.store.db import get_pool
from config.settings import Settings
from surfaces import playbook_events
from surfaces.github import events
from surfaces.limits import too_large_answer, too_large_for_temporal
from surfaces.tasks import start_task, task_id_for
from workflows import search
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SurfaceContext, TaskStatus, UserMessage

log = logging.getLogger(__name__)

# GitHub gives up after 10 s; answer well before, so a slow dependency shows up as a failed
# delivery that can be redelivered rather than a silent timeout.
DEADLINE_SECONDS = 8.0
FORM = "application/x-www-form-urlencoded"  # GitHub's default content type for a webhook
# Plain replies look for a waiting task among this many of the thread's latest tasks.
WAITING_LOOKBACK = 5


def _answer(code: int, **body: Any) -> JSONResponse:
    return JSONResponse(body, status_code=code)


def parse_body(body: bytes, content_type: str) -> Any:
    """The payload of a delivery sent as `application/json` or as GitHub's default,
    `application/x-www-form-urlencoded` (`payload=<the JSON, URL-encoded>`). The signature
    is checked over the raw body before this, either way."""
    if content_type.split(";")[0].strip().lower() == FORM or body.startswith(b"payload="):
        fields = parse_qs(body.decode("ascii"), strict_parsing=True)
        if list(fields) != ["payload"] or len(fields["payload"]) != 1:
            raise ValueError("the form-encoded body has no single `payload` field")
        body = fields["payload"][0].encode()
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise ValueError("the body is not JSON (nor a form with a JSON `payload`)") from None


def register(app: FastAPI) -> None:
    @app.post("/github/webhook")
    async def github_webhook(request: Request) -> JSONResponse:
        settings: Settings = request.app.state.settings
        secret = settings.github_webhook_secret
        if secret is None:
            return _answer(503, error="GITHUB_WEBHOOK_SECRET is not set; refusing unsigned webhooks")
        body = await request.body()
        signature = request.headers.get("X-Hub-Signature-256")
        if not events.verify_signature(secret.get_secret_value().encode(), body, signature):
            return _answer(401, error="bad or missing X-Hub-Signature-256")
        event = request.headers.get("X-GitHub-Event", "")
        delivery = request.headers.get("X-GitHub-Delivery", "")
        if not event or not delivery:
            return _answer(400, error="missing X-GitHub-Event or X-GitHub-Delivery")
        try:
            payload = parse_body(body, request.headers.get("Content-Type", ""))
        except (UnicodeDecodeError, ValueError) as exc:
            return _answer(400, error=str(exc))
        if not isinstance(payload, dict):
            return _answer(400, error="the body is not a JSON object")
        if event == "ping":
            return _answer(200, ok=True, zen=str(payload.get("zen", "")))
        playbooks = await playbook_events.github_delivery(request.app, event, delivery, payload)
        if playbooks is not None and (playbooks.status_code >= 400 or event not in events.HANDLED_EVENTS):
            return playbooks  # a playbook's event only, or runs refused (503: redeliver; 413: too large)
        if event not in events.HANDLED_EVENTS:
            return _answer(200, status="ignored", reason=f"event {event!r} is not handled")
        try:
            answer = await asyncio.wait_for(
                _handle(request.app, settings, event, delivery, payload), DEADLINE_SECONDS
            )
            return playbook_events.with_runs(answer, playbooks)
        except ValueError as exc:
            return _answer(400, error=f"malformed {event} payload: {exc}")
        except TimeoutError:
            log.warning("GitHub delivery %s not handled within %ss", delivery, DEADLINE_SECONDS)
            return _answer(503, error="not handled in time; redeliver it")
        except RPCError as exc:
            log.warning("GitHub delivery %s: Temporal refused: %s", delivery, exc)
            too_large = too_large_for_temporal(exc)
            if too_large is not None:
                return too_large_answer(too_large)
            return _answer(503, error="Temporal is unavailable; redeliver it")


async def _handle(
    app: FastAPI, settings: Settings, event: str, delivery: str, payload: dict[str, Any]
) -> JSONResponse:
    repo = events.repo_of(payload)
    if repo is None:
        raise ValueError("no repository.full_name")
    pool = await get_pool(settings.require_database_url())
    agent = await agent_for_github_repo(pool, repo)
    github = agent.config.spec.surfaces.github if agent else None
    if agent is None or github is None:
        return _answer(200, status="ignored", reason=f"no agent is bound to {repo}")
    decision = events.decide(event, payload, github)
    if isinstance(decision, events.Ignore):
        return _answer(200, status="ignored", reason=decision.reason)
    client: Client = app.state.temporal
    if client is None:
        return _answer(503, error="the surfaces server is not connected to Temporal")
    # A comment in a thread whose task asked a question answers it (mention or not); a CI
    # failure always starts its own investigation.
    thread = decision.thread
    is_comment = event in events.COMMENT_EVENTS
    waiting = await _waiting_task(client, pool, repo, thread) if thread and is_comment else None
    if isinstance(decision, events.FollowUp) or waiting:
        if waiting is None:
            return _answer(200, status="ignored", reason="no mention and no task waiting here")
        return await _follow_up(client, pool, event, delivery, repo, waiting, decision)
    return await _start(client, settings, pool, agent, event, delivery, decision)


async def _remember(
    pool: AsyncConnectionPool,
    delivery: str,
    event: str,
    task_id: str,
    repo: str,
    thread: str | None,
    reaction_path: str | None = None,
) -> bool:
    """Record the delivery; False when it was already fully handled (a redelivery)."""
    async with pool.connection() as conn:
        inserted = await fetch_row(
            conn,
            "INSERT INTO github_deliveries (delivery_id, event, task_id, repo, thread, reaction_path)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (delivery_id) DO NOTHING"
            " RETURNING delivery_id",
            (delivery, event, task_id, repo, thread, reaction_path),
        )
        if inserted:
            return True
        row = await fetch_row(
            conn, "SELECT started_at FROM github_deliveries WHERE delivery_id = %s", (delivery,)
        )
    # Recorded but never started (the start failed midway): starting again is safe, because
    # the workflow id derives from the delivery.
    return row is not None and row["started_at"] is None


async def _done(pool: AsyncConnectionPool, delivery: str) -> None:
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE github_deliveries SET started_at = now() WHERE delivery_id = %s", (delivery,)
        )


async def _start(
    client: Client,
    settings: Settings,
    pool: AsyncConnectionPool,
    agent: StoredAgent,
    event: str,
    delivery: str,
    trigger: events.Trigger,
) -> JSONResponse:
    task_id = task_id_for("github", delivery)
    if not await _remember(
        pool, delivery, event, task_id, trigger.repo, trigger.thread, trigger.reaction_path
    ):
        return _answer(200, status="duplicate", task_id=task_id)
    context = SurfaceContext(
        surface="github",
        channel=trigger.repo,
        user=trigger.user,
        thread=trigger.thread,
        event_id=delivery,
        reply_target=trigger.head_sha,
    )
    _, started = await start_task(
        client, settings, agent, context, trigger.request, task_id=task_id, task_kind=trigger.task_kind
    )
    await _done(pool, delivery)
    if not started:  # the same delivery, sent concurrently, started it: as a redelivery would
        return _answer(200, status="duplicate", task_id=task_id)
    return _answer(202, status="started", task_id=task_id)


async def _waiting_task(client: Client, pool: AsyncConnectionPool, repo: str, thread: str) -> str | None:
    """The latest task started in this issue/PR that waits for a user's answer: a newer task
    in the same thread (a CI investigation, say) does not hide an older one that asked."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT task_id FROM github_deliveries WHERE repo = %s AND thread = %s"
            " AND started_at IS NOT NULL AND task_id IS NOT NULL"
            " GROUP BY task_id ORDER BY max(received_at) DESC LIMIT %s",
            (repo, thread, WAITING_LOOKBACK),
        )
        rows = await cursor.fetchall()
    for row in rows:
        task_id = str(row[0] if not isinstance(row, dict) else row["task_id"])
        if await _waits_for_user(client, task_id):
            return task_id
    return None


async def _waits_for_user(client: Client, task_id: str) -> bool:
    try:
        description = await client.get_workflow_handle(task_id).describe()
    except Exception as exc:  # noqa: BLE001 - gone (retention) or unreachable: nothing waits
        log.info("task %s not described: %s", task_id, type(exc).__name__)
        return False
    status = description.typed_search_attributes.get(search.STATUS)
    return description.status == WorkflowExecutionStatus.RUNNING and status == TaskStatus.WAITING_USER


async def _follow_up(
    client: Client,
    pool: AsyncConnectionPool,
    event: str,
    delivery: str,
    repo: str,
    task_id: str,
    decision: events.Trigger | events.FollowUp,
) -> JSONResponse:
    if not await _remember(pool, delivery, event, task_id, repo, decision.thread):
        return _answer(200, status="duplicate", task_id=task_id)
    text = decision.text if isinstance(decision, events.FollowUp) else decision.request
    handle = client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id)
    await handle.signal(AgentTaskWorkflow.user_message, UserMessage(user=decision.user, text=text))
    await _done(pool, delivery)
    return _answer(202, status="signalled", task_id=task_id)
