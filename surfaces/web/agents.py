"""Agent pages, read-only: every agent's latest applied version, and one agent's versions with
the diff between any two (of the stored specs, as YAML, secret-looking values masked).
Changing an agent is `openloop agents apply`, never a page.
"""

from __future__ import annotations

import difflib

import yaml
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from activities.store.agents import StoredAgent, list_agents, list_versions
from surfaces.web.auth import Person, person
from surfaces.web.common import masked, pool, render

router = APIRouter()


def spec_yaml(agent: StoredAgent) -> str:
    return yaml.safe_dump(masked(agent.config.model_dump(mode="json", by_alias=True)), sort_keys=False)


def version_diff(older: StoredAgent, newer: StoredAgent) -> list[str]:
    return list(
        difflib.unified_diff(
            spec_yaml(older).splitlines(),
            spec_yaml(newer).splitlines(),
            fromfile=f"v{older.version}",
            tofile=f"v{newer.version}",
            lineterm="",
        )
    )


@router.get("/agents", response_class=HTMLResponse)
async def agents(request: Request, who: Person = Depends(person)) -> HTMLResponse:
    return render(request, "agents.html", who, agents=await list_agents(await pool(request)))


@router.get("/agents/{workspace}/{name}", response_class=HTMLResponse)
async def agent(request: Request, workspace: str, name: str, who: Person = Depends(person)) -> HTMLResponse:
    versions = [v for v in await list_versions(await pool(request), name) if v.workspace == workspace]
    if not versions:
        raise HTTPException(404, f"no agent {name} in workspace {workspace}")
    by_number = {v.version: v for v in versions}
    try:
        newer = by_number[int(request.query_params.get("to") or versions[-1].version)]
        older = by_number[
            int(request.query_params.get("from") or max(newer.version - 1, versions[0].version))
        ]
    except (KeyError, ValueError):
        raise HTTPException(400, "no such version of this agent") from None
    diff = version_diff(older, newer) if older.version != newer.version else []
    return render(
        request,
        "agent.html",
        who,
        versions=versions,
        current=newer,
        older=older,
        spec=spec_yaml(newer),
        diff=diff,
    )
