"""The memory page: an agent's memories by scope, newest first or searched exactly as its
tasks recall them, each with where it came from (task and step), its embedding model and
when it expires; an admin can forget one, through `activities.store.memory.forget`, which
deletes it and writes the audit row naming who did it in one transaction.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from activities.store.agents import get_agent, list_agents
from activities.store.memory import forget, list_memories, search
from surfaces.web.auth import PREFIX, Person, Role, person, require, require_csrf
from surfaces.web.common import pool, render
from workflows.types import MemoryScopeRef

router = APIRouter()
LIST_LIMIT = 100
SEARCH_K = 20
SCOPES = ("channel", "agent", "workspace")


@router.get("/memory", response_class=HTMLResponse)
async def memory(request: Request, who: Person = Depends(person)) -> HTMLResponse:
    params = request.query_params
    agent_name, scope, key = params.get("agent", ""), params.get("scope", ""), params.get("key", "")
    text, note = params.get("q", "").strip(), ""
    db = await pool(request)
    agents = await list_agents(db)
    rows: list[Any] = []
    found: list[Any] = []
    if text:
        stored = await get_agent(db, agent_name) if agent_name else None
        if stored is None:
            note = "Choose an agent to search its memory."
        else:
            kept = stored.config.spec.memory
            scope_key = {"agent": stored.name, "workspace": stored.workspace}.get(kept.scope.value) or key
            if not scope_key:
                note = f"{stored.name} keeps channel memory: give the scope key (surface:channel) to search."
            else:
                ref = MemoryScopeRef(
                    workspace=stored.workspace,
                    agent=stored.name,
                    scope=kept.scope.value,
                    scope_key=scope_key,
                    embedding=kept.embedding,
                    retention_days=kept.retention_days,
                )
                found = await search(db, ref, text, SEARCH_K)
                note = f"Searched {ref.scope} {ref.scope_key} as {stored.name}'s tasks recall it."
    else:
        rows = await list_memories(
            db,
            agent=agent_name or None,
            scope=scope if scope in SCOPES else None,
            scope_key=key or None,
            limit=LIST_LIMIT,
        )
    return render(
        request,
        "memory.html",
        who,
        agents=agents,
        rows=rows,
        found=found,
        agent=agent_name,
        scope=scope,
        key=key,
        q=text,
        note=note,
        scopes=SCOPES,
        flash=params.get("forgot", ""),
    )


@router.post("/memory/{memory_id}/forget")
async def forget_memory(request: Request, memory_id: str, who: Person = Depends(person)) -> Response:
    form = await require_csrf(request, who)
    require(who, Role.ADMIN)
    reason = form.get("reason", "").strip()[:200]
    gone = await forget(
        await pool(request), memory_id, who.user, f"dashboard: {reason}" if reason else "dashboard"
    )
    if gone is None:
        return render(request, "message.html", who, status_code=404, message=f"No memory {memory_id}.")
    back = form.get("back", "")
    target = back if back.startswith(f"{PREFIX}/memory") else f"{PREFIX}/memory"
    joiner = "&" if "?" in target else "?"
    return RedirectResponse(f"{target}{joiner}forgot={gone.id}", status_code=303)
