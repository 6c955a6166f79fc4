"""The teammate activity: what a teammate's task starts with, read from the agent store.

A teammate answers with its own applied agent (its model policy, tools, memory scope,
budget and approvals), never the caller's; a name that is not applied is an error a retry
cannot fix.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.runtime import runtime
from activities.store.agents import get_agent
from activities.store.skills import latest_skills
from activities.tools.catalog import specs_for
from workflows.delegate_tool import TeammateLookup, TeammateStart
from workflows.errors import ErrorType
from workflows.types import ActivityName


@activity.defn(name=ActivityName.TEAMMATE_START)
async def teammate_input(inp: TeammateLookup) -> TeammateStart:
    pool = await runtime().pool()
    stored = await get_agent(pool, inp.teammate, inp.workspace)
    if stored is None:
        raise ApplicationError(
            f"no agent {inp.teammate!r} is applied in workspace {inp.workspace!r}",
            type=ErrorType.TOOL_CONFIG_ERROR,
            non_retryable=True,
        )
    names = [ref.rsplit("/", 1)[-1] for ref in stored.config.spec.skills]
    skills = [skill.pinned for skill in await latest_skills(pool, names)]
    return TeammateStart(stored.config, stored.version, specs_for(stored.config), skills)
