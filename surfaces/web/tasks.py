"""Task pages: the list (filtered by the search attributes, paged) and one task's page, whose
live part a running task keeps up to date over server-sent events (`/events`). Without
JavaScript the page is the same, as of when it was loaded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, StreamingResponse
from psycopg_pool import AsyncConnectionPool
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from activities.store.db import get_pool
from surfaces.task_lookup import TaskNotFound, describe_task
from surfaces.web.auth import Person, person
from surfaces.web.common import render, templates, temporal, web_ui_link
from surfaces.web.task_view import FILTERS, BadFilter, TaskPage, list_page, list_query, task_page
from workflows.types import TaskStatus

router = APIRouter()

STREAM_POLL_SECONDS = 1.0
STREAM_SECONDS = 300.0  # the browser reconnects by itself after this


@router.get("/tasks", response_class=HTMLResponse)
async def tasks(request: Request, who: Person = Depends(person)) -> HTMLResponse:
    filters = {name: request.query_params.get(name, "") for name in FILTERS}
    try:
        query = list_query(filters)
    except BadFilter as exc:
        raise HTTPException(400, str(exc)) from None
    try:
        rows, following = await list_page(temporal(request), query, request.query_params.get("page"))
    except RPCError as exc:
        raise HTTPException(
            400,
            f"the visibility query was refused: {exc.message} (are the OpenLoop search attributes "
            "registered? `openloop setup` adds them)",
        ) from None
    except ValueError:
        raise HTTPException(400, "that page link is not valid; start from the first page") from None
    return render(
        request,
        "tasks.html",
        who,
        rows=rows,
        filters=filters,
        query=query,
        next_page=following,
        statuses=[status.value for status in TaskStatus],
    )


async def audit_pool(request: Request) -> AsyncConnectionPool | None:
    """The database a finished task's refused tool calls are read from, when there is one."""
    url = request.app.state.settings.database_url
    return await get_pool(url) if url else None


async def _page(request: Request, task_id: str) -> TaskPage:
    try:
        return await task_page(temporal(request), task_id, await audit_pool(request))
    except TaskNotFound:
        raise HTTPException(404, f"no task {task_id}") from None


@router.get("/tasks/{task_id}", response_class=HTMLResponse)
async def task(request: Request, task_id: str, who: Person = Depends(person)) -> HTMLResponse:
    page = await _page(request, task_id)
    link = web_ui_link(request, page.namespace, task_id)
    return render(request, "task.html", who, page=page, web_ui=link)


def sse(event: str, data: str) -> str:
    lines = "".join(f"data: {line}\n" for line in (data.splitlines() or [""]))
    return f"event: {event}\n{lines}\n"


@router.get("/tasks/{task_id}/events")
async def task_events(request: Request, task_id: str, who: Person = Depends(person)) -> StreamingResponse:
    """The live part of the task page, each time the task's history grows, until it closes."""
    client = temporal(request)
    try:
        await describe_task(client, task_id)
    except TaskNotFound:
        raise HTTPException(404, f"no task {task_id}") from None
    fragment = templates.get_template("task_live.html")
    pool = await audit_pool(request)

    async def stream() -> AsyncIterator[str]:
        seen, deadline = -1, time.monotonic() + STREAM_SECONDS
        yield "retry: 3000\n\n"
        while time.monotonic() < deadline and not await request.is_disconnected():
            description = await describe_task(client, task_id)
            closed = description.status != WorkflowExecutionStatus.RUNNING
            # Once closed, render once more: a page read while the task was finishing may hold
            # its final history with the status it had a moment before.
            if description.history_length != seen or closed:
                page = await task_page(client, task_id, pool)
                seen = page.history_length
                yield sse("update", fragment.render(page=page, me=who))
            if closed:
                yield sse("done", "")
                return
            await asyncio.sleep(STREAM_POLL_SECONDS)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
