"""Running a dataset: each case x repeat is a real task on the running stack, started the way
every surface starts one (`surfaces.tasks.start_task`), on the `eval` surface.

Isolation: a case's task has its own channel (`eval-<run>-<case>-<repeat>`) and its memory
is scoped to that channel (`target.isolated`), so what it seeds, saves and recalls is its
own. The eval surface posts nothing; an outside write (GitHub, Slack) is recorded in the
task's history, never made, and a read of a thread or an issue is answered from the case's
fixtures (`activities.tools.eval_tools`). An approval is decided
here, as the first approver it was asked of: approved when the case says `approve: yes`,
else denied, so the task finishes. A question the agent asks is answered from the case's
`follow_ups`, else the task is cancelled. What the task did is read back through the task
export's readers (`surfaces.evals.facts`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCError

from activities.store.memory import remember
from activities.surface_activities import EVAL_SURFACE
from config.settings import Settings
from surfaces.cli.task_export import build_export, exported_at
from surfaces.decisions import decide
from surfaces.evals.checks import CheckResult, rule_checks
from surfaces.evals.dataset import Case, Dataset
from surfaces.evals.facts import facts_of
from surfaces.evals.judge import judge
from surfaces.evals.results import CASE_ERROR, SKIPPED_BUDGET, TIMED_OUT, CaseRun, EvalRun
from surfaces.evals.target import Target, isolated, scripted
from surfaces.task_lookup import TaskNotFound
from surfaces.tasks import start_task, task_id_for
from workflows.agent_task import AgentTaskWorkflow
from workflows.approval_rule import allowed_approvers
from workflows.policy import memory_scope
from workflows.types import (
    ApprovalDecision,
    CancelRequest,
    Decision,
    SurfaceContext,
    TaskResult,
    TaskStatus,
    UserMessage,
)

__all__ = ["RunOptions", "run_dataset"]

POLL_SECONDS = 0.25  # how often a running case's status is read (approvals, questions)
CASE_TIMEOUT_SECONDS = 300.0
RUNNER = "eval:runner"  # who cancels a case's task


@dataclass(frozen=True)
class RunOptions:
    repeat: int = 1
    parallel: int = 4
    budget_usd: float | None = None
    timeout_seconds: float = CASE_TIMEOUT_SECONDS


Progress = Callable[[CaseRun], None]


async def _drive(
    handle: WorkflowHandle[AgentTaskWorkflow, TaskResult], case: Case, database_url: str
) -> None:
    """Decide the task's approvals and answer its questions until it ends."""
    result = asyncio.ensure_future(handle.result())
    decided: set[str] = set()
    answers = list(case.follow_ups)
    try:
        while not result.done():
            await asyncio.wait({result}, timeout=POLL_SECONDS)
            if result.done():
                break
            try:
                view = await handle.query(AgentTaskWorkflow.status)
            except (RPCError, WorkflowQueryFailedError):
                continue  # no worker answered yet, or it was between runs: read it again
            pending = view.pending_approval
            if pending is not None and pending.request_id not in decided:
                decided.add(pending.request_id)
                who = (allowed_approvers(pending) or [RUNNER])[0]
                said = ApprovalDecision(pending.request_id, pending.action_id, who, note="eval case")
                await decide(
                    handle, database_url, Decision(approve=said) if case.approve else Decision(deny=said)
                )
            elif view.status == TaskStatus.WAITING_USER and view.reply and "asked" not in decided:
                if answers:
                    await handle.signal(
                        AgentTaskWorkflow.user_message, UserMessage(case.context.user, answers.pop(0))
                    )
                    await asyncio.sleep(POLL_SECONDS * 2)  # let it take the answer up
                else:
                    decided.add("asked")
                    reason = "the case gives no answer to the agent's question"
                    await handle.signal(AgentTaskWorkflow.cancel, CancelRequest(RUNNER, reason))
            elif view.status == TaskStatus.WAITING_BUDGET:
                await handle.signal(
                    AgentTaskWorkflow.cancel, CancelRequest(RUNNER, "the case's budget ran out")
                )
        await result
    finally:
        result.cancel()


async def _prepare(
    pool: AsyncConnectionPool, target: Target, case: Case, task_id: str, context: SurfaceContext
) -> Target:
    """Seed the case's memories, store its script and fixtures; the target the case runs on."""
    agent = isolated(scripted(target.agent) if case.scripted else target.agent)
    fixtures = case.context.model_dump(mode="json", include={"thread", "issues"})
    if case.scripted or case.context.thread or case.context.issues:
        answers = [answer.model_dump(mode="json") for answer in case.scripted]
        async with pool.connection() as conn:
            await conn.execute(
                "INSERT INTO eval_scripts (task_id, answers, fixtures) VALUES (%s, %s, %s) "
                "ON CONFLICT (task_id) DO UPDATE SET answers = EXCLUDED.answers, "
                "fixtures = EXCLUDED.fixtures",
                (task_id, Jsonb(answers), Jsonb(fixtures)),
            )
    scope = memory_scope(agent.config, context)
    for index, memory in enumerate(case.context.memories):
        await remember(pool, scope, memory, task_id, 0, f"{task_id}:memory:{index}")
    return Target(agent, target.model)


async def run_case(
    client: Client,
    settings: Settings,
    pool: AsyncConnectionPool,
    target: Target,
    case: Case,
    run_id: str,
    repeat: int,
    options: RunOptions,
) -> CaseRun:
    key = f"{run_id}-{case.id}-{repeat}"
    task_id = task_id_for(EVAL_SURFACE, key)
    context = SurfaceContext(
        surface=EVAL_SURFACE, channel=f"eval-{key}", user=case.context.user, event_id=key
    )
    runs_on = await _prepare(pool, target, case, task_id, context)
    started = time.monotonic()
    handle, _ = await start_task(client, settings, runs_on.agent, context, case.request, task_id=task_id)
    timed_out = False
    try:
        await asyncio.wait_for(_drive(handle, case, settings.require_database_url()), options.timeout_seconds)
    except TimeoutError:
        timed_out = True
        await handle.signal(AgentTaskWorkflow.cancel, CancelRequest(RUNNER, "the eval case timed out"))
    except Exception:  # noqa: BLE001 - a failed or cancelled task still has a history to check
        pass
    latency = int((time.monotonic() - started) * 1000)
    export = await build_export(client, settings.database_url, task_id, False, exported_at())
    facts = facts_of(export, latency)
    checks = rule_checks(case.checks, facts)
    judged_cost = 0.0
    if case.checks.judge is not None:
        verdict, judged_cost = await judge(case.checks.judge, facts)
        checks.append(verdict)
    if not checks:
        checks.append(CheckResult("status", facts.status == "SUCCESS", f"ended {facts.status}"))
    return CaseRun(
        case_id=case.id,
        repeat=repeat,
        task_id=task_id,
        status=TIMED_OUT if timed_out else facts.status,
        checks=checks,
        reply=facts.reply,
        steps=facts.steps,
        tokens=facts.tokens_in + facts.tokens_out,
        cost_usd=facts.cost_usd + judged_cost,
        latency_ms=latency,
    )


async def run_dataset(
    client: Client,
    settings: Settings,
    pool: AsyncConnectionPool,
    dataset: Dataset,
    target: Target,
    run_id: str,
    options: RunOptions,
    progress: Progress | None = None,
    others: dict[str, Target] | None = None,
) -> EvalRun:
    """Every case x repeat of `dataset` on `target` (a case naming another agent runs on
    `others[name]`), at most `options.parallel` at once; once the run has spent
    `options.budget_usd`, the cases not yet started are skipped."""
    run = EvalRun(
        run_id,
        dataset.source,
        target.agent.name,
        target.agent.version,
        target.model,
        target.label,
        datetime.now(UTC),
    )
    gate = asyncio.Semaphore(max(1, options.parallel))
    spent = 0.0

    async def one(case: Case, repeat: int) -> CaseRun:
        nonlocal spent
        async with gate:
            if options.budget_usd is not None and spent >= options.budget_usd:
                why = CheckResult(
                    "budget", False, f"not run: the run spent its --budget-usd {options.budget_usd}"
                )
                done = CaseRun(case.id, repeat, "", SKIPPED_BUDGET, [why])
            else:
                runs_on = (others or {}).get(case.agent or "", target)
                try:
                    done = await run_case(client, settings, pool, runs_on, case, run_id, repeat, options)
                except (RPCError, TaskNotFound, psycopg.Error, ValueError) as exc:
                    # One case that could not run (or be read back) fails alone, saying why;
                    # the run and its report go on.
                    why = CheckResult("run", False, f"could not run the case: {exc}"[:300])
                    done = CaseRun(case.id, repeat, "", CASE_ERROR, [why])
                spent += done.cost_usd
        if progress is not None:
            progress(done)
        return done

    jobs = [one(case, repeat) for case in dataset.cases for repeat in range(1, options.repeat + 1)]
    run.results = list(await asyncio.gather(*jobs))
    run.finished_at = datetime.now(UTC)
    return run
