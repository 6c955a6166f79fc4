"""Starting and signalling tasks: the only thing a surface does with a request.

The workflow id derives from the triggering event, so a retried webhook or a redelivered
event finds the task it already started instead of starting a second one.
"""

from __future__ import annotations

import hashlib
import re

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from activities.store.agents import StoredAgent
from activities.store.db import get_pool
from activities.store.skills import latest_skills
from activities.tools.catalog import specs_for
from config.settings import Settings
from workflows import search
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import SkillRef, SurfaceContext, TaskInput, TaskResult, TaskStatus

_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")


def task_id_for(surface: str, event_id: str) -> str:
    """A stable workflow id for an event; long or odd ids are hashed, never truncated."""
    clean = _UNSAFE.sub("-", event_id)
    if len(clean) > 80:
        clean = hashlib.sha256(event_id.encode()).hexdigest()[:32]
    return f"task-{surface}-{clean}"


def task_search_attributes(agent: StoredAgent, context: SurfaceContext) -> TypedSearchAttributes:
    return TypedSearchAttributes(
        [
            SearchAttributePair(search.AGENT, agent.name),
            SearchAttributePair(search.WORKSPACE, agent.workspace),
            SearchAttributePair(search.CHANNEL, context.channel),
            SearchAttributePair(search.SURFACE, context.surface),
            SearchAttributePair(search.STATUS, TaskStatus.RUNNING.value),
        ]
    )


def task_summary(agent: StoredAgent, request: str) -> str:
    """One line for the Web UI's list: which agent, asked what."""
    line = " ".join(request.split())
    return f"{agent.name}: {line[:117] + '...' if len(line) > 120 else line}"


def task_memo(agent: StoredAgent, context: SurfaceContext, request: str) -> dict[str, str]:
    """Shown with the task in the Web UI and `temporal workflow describe`; the task replaces
    `outcome` with how it ended (a cancelled task still completes as a workflow)."""
    return {
        "description": task_summary(agent, request),
        "agent": f"{agent.name} v{agent.version}",
        "asked_by": f"{context.user} on {context.surface} {context.channel}".strip(),
        "outcome": "running",
    }


async def pinned_skills(settings: Settings, agent: StoredAgent) -> list[SkillRef]:
    """The latest applied version of each skill the agent names: the task keeps these."""
    names = [ref.rsplit("/", 1)[-1] for ref in agent.config.spec.skills]
    if not names or not settings.database_url:
        return []
    found = await latest_skills(await get_pool(settings.database_url), names)
    return [skill.pinned for skill in found]


async def start_task(
    client: Client,
    settings: Settings,
    agent: StoredAgent,
    context: SurfaceContext,
    request: str,
    *,
    task_id: str,
    task_kind: str = "chat",
) -> tuple[WorkflowHandle[AgentTaskWorkflow, TaskResult], bool]:
    """Start the task for an event, or find the one it already started. Returns (handle, started)."""
    task_input = TaskInput(
        task_id=task_id,
        agent=agent.config,
        agent_version=agent.version,
        context=context,
        request=request,
        task_kind=task_kind,
        tools=specs_for(agent.config),
        skills=await pinned_skills(settings, agent),
        loop_queue=settings.loop_task_queue,  # where a coding task takes its workspace
    )
    try:
        handle = await client.start_workflow(
            AgentTaskWorkflow.run,
            task_input,
            id=task_id,
            task_queue=settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            search_attributes=task_search_attributes(agent, context),
            static_summary=task_summary(agent, request),
            memo=task_memo(agent, context, request),
            static_details=(
                f"Agent **{agent.name}** v{agent.version} ({agent.workspace}) for "
                f"{context.user} on {context.surface} {context.channel}\n\n> {request[:500]}"
            ),
        )
        return handle, True
    except WorkflowAlreadyStartedError:
        return client.get_workflow_handle_for(AgentTaskWorkflow.run, task_id), False
