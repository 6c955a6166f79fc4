"""The Temporal worker: every workflow and activity of OpenLoop, registered in one place.

The sandbox pass-through lives in `workers.sandbox`, shared with the tests and replay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.trace import TracerProvider
from temporalio.client import Client
from temporalio.worker import Worker

from activities.admission_activities import ADMISSION_ACTIVITIES
from activities.approval_activities import prepare_approval
from activities.github.pull_request import open_pull_request
from activities.llm.model_activities import call_model
from activities.loops.loop_activities import LOOP_STORE_ACTIVITIES
from activities.mcp.mcp_activities import call_mcp_tool, list_mcp_tools
from activities.mcp.worker_lifetime import mcp_sessions_held
from activities.playbooks.playbook_activities import PLAYBOOK_ACTIVITIES
from activities.store import store_activities
from activities.store.skill_activities import load_skill
from activities.surface_activities import (
    post_approval_request,
    post_reply,
    resolve_approval_request,
    task_started,
)
from activities.team_activities import teammate_input
from activities.tools.tool_activities import run_tool
from config.settings import Settings
from workers.sandbox import workflow_runner
from workers.telemetry import worker_interceptors
from workflows.agent_admission import AgentAdmissionWorkflow
from workflows.agent_budget import AgentBudgetWorkflow
from workflows.agent_task import AgentTaskWorkflow
from workflows.playbook_run import PlaybookRunWorkflow
from workflows.playbook_sensor_poll import PlaybookSensorPollWorkflow
from workflows.repair_loop import RepairLoopWorkflow
from workflows.retention import MemoryRetentionWorkflow

# Defaults sized for a 2-core machine; production overrides them by environment.
MAX_CONCURRENT_ACTIVITIES = 100
MAX_CONCURRENT_WORKFLOW_TASKS = 100
MAX_CACHED_WORKFLOWS = 1000
CACHE_PER_SLOT = 5  # sticky-cache entries per workflow-task slot, at least


WORKFLOWS: Sequence[type] = (
    AgentTaskWorkflow,
    MemoryRetentionWorkflow,
    AgentBudgetWorkflow,
    AgentAdmissionWorkflow,
    RepairLoopWorkflow,
    PlaybookRunWorkflow,
    PlaybookSensorPollWorkflow,
)

ACTIVITIES: Sequence[Callable[..., Any]] = (
    call_model,
    run_tool,
    call_mcp_tool,
    list_mcp_tools,
    load_skill,
    teammate_input,
    store_activities.recall,
    store_activities.purge_expired_memories,
    store_activities.record_audit,
    store_activities.save_task_constants,
    task_started,
    post_reply,
    post_approval_request,
    resolve_approval_request,
    prepare_approval,
    open_pull_request,
    *ADMISSION_ACTIVITIES,
    *LOOP_STORE_ACTIVITIES,
    *PLAYBOOK_ACTIVITIES,
)


class OpenLoopWorker(Worker):
    """A Temporal worker that closes the process's MCP sessions when it stops."""

    async def run(self) -> None:
        async with mcp_sessions_held():
            await super().run()


def build_worker(
    client: Client,
    settings: Settings,
    task_queue: str | None = None,
    *,
    activities: Sequence[Callable[..., Any]] | None = None,
    max_cached_workflows: int = MAX_CACHED_WORKFLOWS,
    max_concurrent_activities: int = MAX_CONCURRENT_ACTIVITIES,
    max_concurrent_workflow_tasks: int = MAX_CONCURRENT_WORKFLOW_TASKS,
    tracer_provider: TracerProvider | None = None,
    **worker_options: Any,
) -> Worker:
    """A worker for every OpenLoop workflow and activity (tests may swap in stand-ins, and
    send its spans to a `tracer_provider` of their own)."""
    from activities import runtime

    runtime.configure(settings)
    if max_cached_workflows > 0:
        # More workflow-task slots than a fifth of the sticky cache make a burst of tasks
        # evict each other's state and replay: with 100 slots for a 100-workflow cache,
        # parking 300 tasks took twice as long and filled the log with task timeouts.
        max_concurrent_workflow_tasks = max(
            2, min(max_concurrent_workflow_tasks, max_cached_workflows // CACHE_PER_SLOT)
        )
    return OpenLoopWorker(
        client,
        task_queue=task_queue or settings.task_queue,
        workflows=list(WORKFLOWS),
        activities=list(activities if activities is not None else ACTIVITIES),
        workflow_runner=workflow_runner(),
        max_concurrent_activities=max_concurrent_activities,
        max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
        max_cached_workflows=max_cached_workflows,
        interceptors=[
            *worker_interceptors(settings, tracer_provider=tracer_provider),
            *worker_options.pop("interceptors", ()),
        ],
        **worker_options,
    )
