"""Repair loop pages, read-only: the recent loops with their status, rounds and last round's
verdict, and one loop with each round's commands and tests and the change it made (its last
stored diff from the base commit). Starting or stopping a loop is `openloop loops`, never a page.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from psycopg.rows import dict_row

from activities.store import loops as loop_rows
from surfaces.web.auth import Person, person
from surfaces.web.common import masked, pool, render
from workflows.egress_blocked import command_egress_lines
from workflows.loop_types import LoopStatus

router = APIRouter()
LIST_LIMIT = 200
DIFF_LINES = 3000  # a page shows this much of a diff; `openloop loops diff` prints it whole

_LISTED = """
SELECT l.loop_id, l.name, l.status, l.reason, l.started_by, l.started_at, l.finished_at,
       (SELECT count(*) FROM loop_rounds r WHERE r.loop_id = l.loop_id) AS rounds,
       (SELECT r.report ->> 'verdict' FROM loop_rounds r WHERE r.loop_id = l.loop_id
         ORDER BY r.round DESC LIMIT 1) AS last_verdict
FROM loops l
WHERE (%(status)s::text IS NULL OR l.status = %(status)s)
  AND (%(name)s::text IS NULL OR l.name = %(name)s)
ORDER BY l.started_at DESC
LIMIT %(limit)s
"""


@router.get("/loops", response_class=HTMLResponse)
async def loops(request: Request, who: Person = Depends(person)) -> HTMLResponse:
    status = request.query_params.get("status", "").upper() or None
    name = request.query_params.get("name", "").strip() or None
    if status is not None and status not in LoopStatus.__members__:
        raise HTTPException(400, f"no loop status {status}; one of {', '.join(LoopStatus.__members__)}")
    db = await pool(request)
    async with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(_LISTED, {"status": status, "name": name, "limit": LIST_LIMIT})
        rows: list[dict[str, Any]] = list(await cur.fetchall())
    return render(
        request,
        "loops.html",
        who,
        loops=rows,
        status=status or "",
        loop_name=name or "",
        statuses=list(LoopStatus.__members__),
        limit=LIST_LIMIT,
    )


@router.get("/loops/{loop_id}", response_class=HTMLResponse)
async def loop(request: Request, loop_id: str, who: Person = Depends(person)) -> HTMLResponse:
    db = await pool(request)
    row = await loop_rows.loop_row(db, loop_id)
    if row is None:
        raise HTTPException(404, f"no loop {loop_id}")
    reports = await loop_rows.reports(db, loop_id)
    last = next((report.diff for report in reversed(reports) if report.diff is not None), None)
    patch = await loop_rows.load_diff(db, last.sha256) if last is not None else None
    diff = patch.decode(errors="replace").splitlines() if patch else []
    return render(
        request,
        "loop.html",
        who,
        loop=row,
        spec=masked(row["spec"]),
        reports=reports,
        # What each command's network allowlist refused (naming the command) and let through.
        egress=[[command_egress_lines(c.command, c.egress) for c in r.commands] for r in reports],
        snapshot=last,
        diff=diff[:DIFF_LINES],
        diff_cut=max(0, len(diff) - DIFF_LINES),
    )
