"""The approvals inbox page and its Approve/Deny form (`surfaces.web.approval_inbox` sends the
decision to the task). A plain form post answers with the inbox and the verdict; an htmx
post with the verdict alone, in place of the request it decided.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from surfaces.web.approval_inbox import InboxPage, Verdict, decide, inbox
from surfaces.web.auth import Person, Role, person, require_csrf
from surfaces.web.common import render, temporal

router = APIRouter()


async def _inbox(request: Request, who: Person, page: str | None = None) -> InboxPage:
    return await inbox(temporal(request), who.ids if who.can(Role.APPROVER) else (), page)


@router.get("/approvals", response_class=HTMLResponse)
async def approvals(request: Request, page: str | None = None, who: Person = Depends(person)) -> HTMLResponse:
    found = await _inbox(request, who, page)
    return render(
        request,
        "approvals.html",
        who,
        pending=found.pending,
        others=found.others,
        next_page=found.next_page,
        verdict=None,
    )


@router.post("/approvals/{task_id}", response_class=HTMLResponse)
async def decide_approval(request: Request, task_id: str, who: Person = Depends(person)) -> HTMLResponse:
    form = await require_csrf(request, who)
    decision = form.get("decision", "")
    if not who.can(Role.APPROVER):
        verdict = Verdict(False, 403, f"Not counted: you are signed in as a {who.role}, who cannot approve.")
    elif decision not in ("approve", "deny"):
        verdict = Verdict(False, 400, "Not counted: the form must say approve or deny.")
    else:
        # The form names which of the person's names may decide (the inbox found it); a name
        # that is not theirs is never sent: their own is, and the task judges it.
        named = str(form.get("approver", ""))
        verdict = await decide(
            temporal(request),
            request.app.state.settings.database_url,
            task_id,
            named if named in who.ids else who.user,
            form.get("request_id", ""),
            form.get("action_id", ""),
            decision == "approve",
        )
    if request.headers.get("hx-request") == "true":
        return render(request, "verdict.html", who, verdict=verdict, task_id=task_id)
    found = await _inbox(request, who)
    return render(
        request,
        "approvals.html",
        who,
        status_code=verdict.status,
        pending=found.pending,
        others=found.others,
        next_page=found.next_page,
        verdict=verdict,
        task_id=task_id,
    )
