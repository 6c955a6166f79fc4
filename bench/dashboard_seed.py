"""What the dashboard bench loads its pages against: tasks in Temporal, their usage rows and
memories in Postgres.

Three kinds of task, newest last so the first page shows what an operator's would:
- listed tasks: workflows of the task workflow's type, started the way a surface starts a
  task (`surfaces.tasks` search attributes and memo), that on their one workflow task set
  the finished status and cost, as a task does when it ends. A real task costs this machine
  ~0.1 s of the two cores (10.8 tasks/s measured), so 10,000 would take 15 minutes; these
  leave the same visibility rows at ~80/s (eager start, one workflow task each). Their
  usage rows (two model calls each, spread over the month) go into `usage_ledger` in bulk.
- real tasks: the real workflow on the real worker with the scripted model (one memory.search
  folded into the next model call, then the answer), whose page, timeline and usage rows
  are real.
- waiting tasks: real tasks waiting for `cli:bench` to approve memory.save, so the inbox and
  the first page have live tasks to ask.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.store.agents import apply_agent
from activities.store.db import get_pool
from activities.store.ledger_reports import month_start
from activities.store.memory import remember
from bench.common import APPROVER, Stack, new_queue, start_agent_task
from bench.scripted import Plan
from config.agent import AgentConfig
from surfaces.tasks import task_id_for, task_memo, task_search_attributes
from workflows import search
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import WORKFLOW_NAME, MemoryScopeRef, SurfaceContext, TaskStatus

START_CONCURRENCY = 100  # starts in flight from the bench at once
MODELS = ("openai/gpt-4o-mini", "anthropic/claude-3-5-haiku", "openai/gpt-4o")
# One in a hundred listed tasks ended some other way than SUCCESS, each of these in turn.
OTHER_ENDINGS = (TaskStatus.NO_PROGRESS, TaskStatus.BUDGET_EXHAUSTED, TaskStatus.APPROVAL_DENIED)


@workflow.defn(name=WORKFLOW_NAME)
class ListedTask:
    """A finished task as visibility lists it: the status and cost a task sets as it ends."""

    @workflow.run
    async def run(self, ending: dict[str, Any]) -> dict[str, Any]:
        workflow.upsert_search_attributes(
            [search.STATUS.value_set(ending["status"]), search.COST_USD.value_set(ending["cost_usd"])]
        )
        workflow.upsert_memo({"outcome": ending["status"]})
        return ending


@dataclass
class Seeded:
    real_task_ids: list[str]
    waiting_task_ids: list[str]
    figures: dict[str, Any]


def agent_names(count: int) -> list[str]:
    return [f"dash-{i}" for i in range(count)]


def channel(index: int, channels: int) -> str:
    return f"dash-ch-{index % channels}"


def dash_agent(name: str) -> AgentConfig:
    """An agent with monthly budgets (the spend page's bars and burn-down need them)."""
    spec: dict[str, Any] = {
        "model_policy": {"default": "offline/demo"},
        "tools": [{"name": "memory.search", "permissions": ["memory:read"]}],
        "limits": {"max_iterations": 1000, "token_limit": 10**9, "wall_clock": "12h"},
        "budget": {"per_task_usd": 5.0, "monthly_usd": 400.0, "per_channel_monthly_usd": 60.0},
    }
    return AgentConfig.model_validate(
        {"apiVersion": "openloop.ai/v1alpha1", "kind": "Agent", "metadata": {"name": name}, "spec": spec}
    )


async def apply_agents(stack: Stack, count: int) -> None:
    pool = await get_pool(stack.settings.require_database_url())
    for name in agent_names(count):
        stack.agents[name], _ = await apply_agent(pool, dash_agent(name))


def ending(index: int) -> dict[str, Any]:
    status = OTHER_ENDINGS[(index // 100) % len(OTHER_ENDINGS)] if index % 100 == 99 else TaskStatus.SUCCESS
    return {"status": status.value, "cost_usd": round(0.002 + (index % 37) * 0.0011, 6)}


async def seed_listed(stack: Stack, count: int, agents: int, channels: int) -> tuple[list[str], float]:
    """`count` listed tasks, started and finished; returns their ids and the seconds it took."""
    queue = new_queue("listed")
    names = agent_names(agents)
    gate = asyncio.Semaphore(START_CONCURRENCY)

    async def start(client: Client, index: int) -> str:
        agent = stack.agents[names[index % agents]]
        event = f"dash-listed-{queue}-{index}"
        context = SurfaceContext(
            surface="cli", channel=channel(index, channels), user=APPROVER, event_id=event
        )
        request = f"why did deploy {index} of service {index % 13} fail?"
        async with gate:
            handle = await client.start_workflow(
                WORKFLOW_NAME,
                ending(index),
                id=task_id_for("cli", event),
                task_queue=queue,
                search_attributes=task_search_attributes(agent, context),
                memo=task_memo(agent, context, request),
                request_eager_start=True,  # the start's answer carries the first workflow task
            )
        return handle.id

    worker = Worker(
        stack.client,
        task_queue=queue,
        workflows=[ListedTask],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_concurrent_workflow_tasks=START_CONCURRENCY * 2,
    )
    began = time.perf_counter()
    async with worker:
        ids = await asyncio.gather(*(start(stack.client, i) for i in range(count)))
        await until_counted(stack.client, f"TaskQueue = '{queue}' AND ExecutionStatus = 'Completed'", count)
    return list(ids), time.perf_counter() - began


async def until_counted(client: Client, query: str, count: int, give_up_after: float = 600.0) -> None:
    """Visibility trails the workflows by a moment: wait until `query` counts `count`."""
    deadline = time.monotonic() + give_up_after
    while (await client.count_workflows(query)).count < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"visibility never counted {count} for {query}")
        await asyncio.sleep(0.5)


async def seed_usage(stack: Stack, ids: list[str], agents: int, channels: int) -> float:
    """Two model calls' usage rows per listed task, spread from the month's start to now."""
    now = datetime.now(UTC)
    start = month_start(now)
    names = agent_names(agents)
    rows = []
    for index, task_id in enumerate(ids):
        at = start + (now - start) * (index / max(1, len(ids)))
        cost = ending(index)["cost_usd"]
        for step in (1, 2):
            model = MODELS[(index + step) % len(MODELS)]
            agent, chan = names[index % agents], channel(index, channels)
            rows.append(
                (
                    task_id,
                    f"model:{step}",
                    step,
                    "default",
                    agent,
                    chan,
                    "cli",
                    model,
                    1200,
                    150,
                    cost / 2,
                    at,
                )
            )
    began = time.perf_counter()
    pool = await get_pool(stack.settings.require_database_url())
    async with pool.connection() as conn, conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO usage_ledger (task_id, key, step, workspace, agent, channel, surface, model,"
            " prompt_tokens, completion_tokens, cost_usd, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
    return time.perf_counter() - began


async def seed_real(
    stack: Stack, queue: str, count: int, agents: int, channels: int
) -> tuple[list[str], float]:
    """`count` real tasks run to their answer by the worker on `queue`."""
    plan = Plan(steps=2, tool="memory.search")
    names = agent_names(agents)
    tag = queue.rsplit("-", 1)[-1]
    began = time.perf_counter()
    handles = []
    for index in range(count):  # a handful in flight, so their starts interleave with the worker
        handles.append(
            await start_agent_task(stack, queue, plan, f"dash-real-{tag}-{index}", names[index % agents])
        )
    for handle in handles:
        await handle.result()
    return [h.id for h in handles], time.perf_counter() - began


async def seed_long(stack: Stack, queue: str, steps: int) -> str:
    """One real task of `steps` model calls (a memory.search in each but the last), finished."""
    plan = Plan(steps=steps, tool="memory.search")
    handle = await start_agent_task(stack, queue, plan, f"dash-long-{queue.rsplit('-', 1)[-1]}", "dash-0")
    result = await asyncio.wait_for(handle.result(), timeout=300)
    if result.status != TaskStatus.SUCCESS:
        raise RuntimeError(f"the long task ended {result.status.value}: {result.reason}")
    return handle.id


async def seed_waiting(stack: Stack, queue: str, count: int) -> list[str]:
    """`count` real tasks of `bench-approvals`, each waiting for `cli:bench` to approve a
    memory.save."""
    tag = queue.rsplit("-", 1)[-1]
    plan = Plan(steps=2, tool="memory.save")
    handles = [
        await start_agent_task(stack, queue, plan, f"dash-wait-{tag}-{i}", "bench-approvals")
        for i in range(count)
    ]
    deadline = time.monotonic() + 120 + count * 0.5
    for handle in handles:
        while not await _asked(handle):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{handle.id} never asked for approval")
            await asyncio.sleep(0.1)
    return [h.id for h in handles]


async def _asked(handle: Any) -> bool:
    """Whether the task waits for its approval yet; a query a busy worker cannot answer now is
    asked again."""
    try:
        status = await handle.query(AgentTaskWorkflow.status, rpc_timeout=timedelta(seconds=10))
    except RPCError as err:
        # Late, or its workflow task failed once (timed out on a loaded machine) and is retried.
        if err.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED) or "failed state" in str(
            err
        ):
            return False
        raise
    return status.pending_approval is not None


async def seed_memories(stack: Stack, count: int, agents: int, channels: int) -> float:
    """`count` memories in the agents' channel scopes, through the store's own `remember`."""
    pool = await get_pool(stack.settings.require_database_url())
    names = agent_names(agents)
    began = time.perf_counter()
    for index in range(count):
        stored = stack.agents[names[index % agents]]
        kept = stored.config.spec.memory
        scope = MemoryScopeRef(
            workspace=stored.workspace,
            agent=stored.name,
            scope=kept.scope.value,
            scope_key=f"cli:{channel(index, channels)}",
            embedding=kept.embedding,
            retention_days=kept.retention_days,
        )
        text = (
            f"Decision {index}: service {index % 13} deploys on Tuesdays after the {index % 7} o'clock build."
        )
        await remember(pool, scope, text, f"dash-memory-{index}", 1, f"dash-memory-{index}")
    return time.perf_counter() - began
