"""Eval run pages, read-only: the recent runs of `openloop eval run` with their pass rates and
cost, and one run with each case's checks, a link to each case's task page and, for a run
made by `--compare`, what changed against the run it was compared with. Running an eval is
`openloop eval run`, never a page."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from surfaces.evals.report import changes
from surfaces.evals.store import LIST_LIMIT, list_runs, load_run
from surfaces.web.auth import Person, person
from surfaces.web.common import pool, render

router = APIRouter()


@router.get("/evals", response_class=HTMLResponse)
async def evals(request: Request, who: Person = Depends(person)) -> HTMLResponse:
    runs = await list_runs(await pool(request))
    return render(request, "evals.html", who, runs=runs, limit=LIST_LIMIT)


@router.get("/evals/{run_id}", response_class=HTMLResponse)
async def eval_run(request: Request, run_id: str, who: Person = Depends(person)) -> HTMLResponse:
    db = await pool(request)
    run = await load_run(db, run_id)
    if run is None:
        raise HTTPException(404, f"no eval run {run_id}")
    before = await load_run(db, run.compared_to) if run.compared_to else None
    return render(
        request,
        "eval.html",
        who,
        run=run,
        before=before,
        changes=changes(before, run) if before is not None else [],
    )
