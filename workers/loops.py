"""Loop workers: the Temporal workers that hold repair-loop workspaces and run their commands.

One process holds two: one polls the shared loop queue to take workspaces, the other polls a
queue only this process serves, where every command and diff of the workspaces it took goes,
and every coding tool call of an agent task that holds one of them (Temporal's pattern for
stateful sessions). The loop workflow itself and its rows run on the ordinary worker. At
start the sandbox is checked, and a missing one is said loudly.
"""

from __future__ import annotations

import logging

from temporalio.client import Client
from temporalio.worker import Worker

from activities import runtime
from activities.loops.host import LoopHost, configure_host
from activities.loops.loop_activities import SHARED_QUEUE_ACTIVITIES, WORKSPACE_ACTIVITIES
from activities.loops.sandbox import sandbox_problem
from activities.tools.code_activities import CODE_WORKSPACE_ACTIVITIES
from config.settings import Settings
from workers.telemetry import worker_interceptors

log = logging.getLogger("openloop.loops")

MAX_WORKSPACES = 4  # loops one worker takes at once
MAX_COMMANDS = 8


def build_loop_workers(
    client: Client, settings: Settings, *, name: str | None = None
) -> tuple[LoopHost, list[Worker]]:
    runtime.configure(settings)
    host = configure_host(settings.loop_workspaces, name, settings.loop_task_queue)
    problem = sandbox_problem()
    if problem:
        log.error("the sandbox cannot run here, so loops that use it will stop with ERROR: %s", problem)
    interceptors = list(worker_interceptors(settings))
    shared = Worker(
        client,
        task_queue=settings.loop_task_queue,
        activities=list(SHARED_QUEUE_ACTIVITIES),
        max_concurrent_activities=MAX_WORKSPACES,
        interceptors=interceptors,
    )
    own = Worker(
        client,
        task_queue=host.task_queue,
        activities=[*WORKSPACE_ACTIVITIES, *CODE_WORKSPACE_ACTIVITIES],
        max_concurrent_activities=MAX_COMMANDS,
        interceptors=interceptors,
    )
    log.info("loop worker %s: workspaces in %s, commands on %s", host.name, host.workspaces, host.task_queue)
    return host, [shared, own]


def loop_workers(client: Client, settings: Settings) -> list[Worker]:
    """Both workers of this process as a loop worker (`openloop worker --loops`)."""
    return build_loop_workers(client, settings)[1]
