"""A repair loop: play, scan, fix, verify and baseline a project, round after round, until every
check passes or the loop stops for a reason a person can read.

Durable where loop scripts are not: each command is an activity with a timeout on the worker
that holds the workspace (its own task queue), each finished round's diff is stored, and when
that worker dies the workspace is rebuilt on another one from the last finished round's diff
and the round runs again. Judging rounds is `workflows.loop_progress`; the commands run in
`activities.loops`.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows import loop_workspace
from workflows.loop_fixer import AgentFixer
from workflows.loop_progress import LoopProgress
from workflows.loop_workspace import WorkspaceLost, interruption, why

with workflow.unsafe.imports_passed_through():
    from workflows.activity_options import STORE_OPTIONS, SURFACE_OPTIONS
    from workflows.loop_types import (
        LOOP_WORKFLOW_NAME,
        CommandRequest,
        CommandResult,
        DiffSnapshot,
        LoopActivity,
        LoopInput,
        LoopResult,
        LoopStatus,
        LoopView,
        RoundReport,
        Step,
        WorkspaceHandle,
    )
    from workflows.message_types import PostReplyInput
    from workflows.setup_types import setup_line
    from workflows.task_basics import ActivityName, SurfaceContext, TaskStatus

_STORE = STORE_OPTIONS
_LAST_ERROR_CHARS = 2000
# A surface shows a task's status (reactions, progress); a loop's end maps onto the nearest.
_AS_TASK_STATUS = {
    LoopStatus.SUCCESS: TaskStatus.SUCCESS,
    LoopStatus.NO_PROGRESS: TaskStatus.NO_PROGRESS,
    LoopStatus.BUDGET_EXHAUSTED: TaskStatus.BUDGET_EXHAUSTED,
    LoopStatus.CANCELLED: TaskStatus.CANCELLED,
}


@workflow.defn(name=LOOP_WORKFLOW_NAME)
class RepairLoopWorkflow:
    def __init__(self) -> None:
        self._view: LoopView | None = None
        self._diff: DiffSnapshot | None = None  # the last finished round's
        self._durations: dict[Step, float] = {}  # each step's last run, for the ETA
        self._fixer: AgentFixer | None = None  # `fix: {agent: NAME}`
        self._failing: list[str] = []  # the last round's failing tests, for an agent fixer
        self._setup = ""  # how the workspace's setup went, for the next round's note

    @workflow.query(name="progress")
    def progress(self) -> LoopView | None:
        return self._view

    def _show(self, **changes: object) -> None:
        assert self._view is not None
        self._view = self._view.model_copy(update=changes)

    @workflow.run
    async def run(self, inp: LoopInput) -> LoopResult:
        spec = inp.spec
        sandboxed = spec.sandbox.provider != "none"
        self._view = LoopView(
            loop_id=inp.loop_id, name=spec.name, status=LoopStatus.RUNNING, round=0, step=None,
            worker="", verdicts=[], sandboxed=sandboxed,
        )  # fmt: skip
        await workflow.execute_activity(LoopActivity.START, inp, summary=f"loop {spec.name}", **_STORE)
        try:
            result = await self._rounds(inp)
        except asyncio.CancelledError:
            result = self._result(
                inp, LoopStatus.CANCELLED, "cancelled", "start it again with openloop loops run"
            )
        except (ActivityError, WorkspaceLost) as err:
            result = self._result(
                inp,
                LoopStatus.ERROR,
                why(err),
                f"fix the cause, then run it again; openloop loops doctor {spec.source or 'FILE'}",
            )
        self._show(status=result.status, reason=result.reason, next_action=result.next_action, step=None)
        await workflow.execute_activity(
            LoopActivity.FINISH, result, summary=f"loop {result.status}", **_STORE
        )
        if inp.reply_to is not None:
            await self._tell(inp, inp.reply_to, result)
        return result

    async def _tell(self, inp: LoopInput, where: SurfaceContext, result: LoopResult) -> None:
        """How the loop ended, in the thread or issue whose task started it."""
        text = (
            f"Repair loop *{inp.spec.name}* (`{inp.loop_id}`) ended {result.status.value} after "
            f"{result.rounds} round(s): {result.reason}\nNext: {result.next_action}"
        )
        status = _AS_TASK_STATUS.get(result.status, TaskStatus.ERROR)
        await workflow.execute_activity(
            ActivityName.POST_REPLY,
            PostReplyInput(inp.loop_id, where, text, status, result.rounds),
            summary="tell the thread",
            **SURFACE_OPTIONS,
        )

    def _result(self, inp: LoopInput, status: LoopStatus, reason: str, next_action: str) -> LoopResult:
        assert self._view is not None
        return LoopResult(
            loop_id=inp.loop_id, status=status, reason=reason, next_action=next_action,
            rounds=len(self._view.verdicts), diff=self._diff,
        )  # fmt: skip

    async def _rounds(self, inp: LoopInput) -> LoopResult:
        spec = inp.spec
        progress = LoopProgress(
            spec.limits,
            spec.baseline,
            has_fixer=Step.FIX in spec.commands or Step.IMPROVE in spec.commands,
        )
        self._fixer = AgentFixer(inp) if spec.fixer_agent else None
        workspace = await self._acquire(inp)
        last_error, round_, reacquired, interrupted = "", 1, 0, ""
        started = workflow.now()
        while True:
            limit = spec.limits.max_duration_s
            ran = (workflow.now() - started).total_seconds()
            if limit is not None and ran >= limit:
                return self._result(
                    inp, LoopStatus.TIMED_OUT,
                    f"ran {ran:.0f} s, past limits.max_duration ({limit:.0f} s), after {round_ - 1} round(s)",
                    "raise limits.max_duration if the rounds were improving: "
                    f"openloop loops report {inp.loop_id}",
                )  # fmt: skip
            if self._fixer is not None and self._fixer.exhausted:
                return self._result(
                    inp, LoopStatus.BUDGET_EXHAUSTED,
                    f"{spec.fixer_agent} spent the loop's budget (${self._fixer.spent.cost_usd:.4f} of "
                    f"${spec.limits.budget_usd:.2f}) in {round_ - 1} round(s)",
                    f"raise limits.budget if the rounds were improving: openloop loops report {inp.loop_id}",
                )  # fmt: skip
            self._show(round=round_)
            try:
                results = await self._round(inp, workspace, round_, progress, last_error)
                diff = await loop_workspace.save_diff(inp, workspace, round_)
            except WorkspaceLost as lost:
                reacquired += 1
                if reacquired > inp.timeouts.max_reacquires:
                    raise WorkspaceLost(f"lost the workspace {reacquired} times; last: {lost}") from None
                workflow.logger.warning("workspace lost in round %d (%s); rebuilding it", round_, lost)
                assert self._view is not None
                interrupted = interruption(lost, round_, self._view.step)
                workspace = await self._acquire(inp)
                continue  # the same round again, from the last finished round's diff
            judgement = progress.judge(results)
            failed = [r for r in results if r.step is not Step.FIX and r.outcome.value != "passed"]
            last_error = (failed[-1].error_summary or failed[-1].tail)[-_LAST_ERROR_CHARS:] if failed else ""
            if judgement.fewer:  # the next fix hears that the tests it removed must come back
                last_error = "\n".join(filter(None, [judgement.fewer, last_error]))[:_LAST_ERROR_CHARS]
            self._diff = diff
            self._failing = sorted({*(judgement.failing or []), *judgement.gone})
            report = RoundReport(
                loop_id=inp.loop_id, round=round_, commands=results, failing_tests=judgement.failing,
                fixed_tests=judgement.fixed, broken_tests=judgement.broken, gone_tests=judgement.gone,
                metric=judgement.metric,
                verdict=judgement.verdict, diff=diff, worker=workspace.worker,
                note="; ".join(filter(None, [interrupted, self._setup, judgement.note])),
            )  # fmt: skip
            interrupted = self._setup = ""
            await workflow.execute_activity(
                LoopActivity.RECORD_ROUND, report, summary=f"round {round_}: {judgement.verdict}", **_STORE
            )
            assert self._view is not None
            self._show(verdicts=[*self._view.verdicts, judgement.verdict])
            stop = progress.stop(round_, judgement, inp.loop_id)
            if stop is not None:
                return self._result(inp, stop.status, stop.reason, stop.next_action)
            round_ += 1

    async def _round(
        self, inp: LoopInput, workspace: WorkspaceHandle, round_: int, progress: LoopProgress, last_error: str
    ) -> list[CommandResult]:
        commands = inp.spec.commands
        results: list[CommandResult] = []
        for step in (Step.PLAY, Step.SCAN):
            if step in commands:
                results.append(await self._command(inp, workspace, round_, step, commands[step], last_error))
        fixer: Step | None = None
        if progress.metric_missed:
            fixer = Step.IMPROVE if Step.IMPROVE in commands else Step.FIX if Step.FIX in commands else None
        elif progress.needs_fix(results) and Step.FIX in commands:
            fixer = Step.FIX
        if fixer is Step.FIX and self._fixer is not None:
            self._show(step=Step.FIX)
            results.append(await self._fixer.fix(workspace, round_, self._failing, last_error))
        elif fixer is not None:
            results.append(await self._command(inp, workspace, round_, fixer, commands[fixer], last_error))
        results.append(
            await self._command(inp, workspace, round_, Step.VERIFY, commands[Step.VERIFY], last_error)
        )
        if inp.spec.baseline is not None:
            baseline = inp.spec.baseline
            results.append(
                await self._command(
                    inp, workspace, round_, Step.BASELINE, baseline.command, last_error, baseline.regex
                )
            )
        return results

    async def _command(
        self,
        inp: LoopInput,
        workspace: WorkspaceHandle,
        round_: int,
        step: Step,
        command: str,
        last_error: str,
        metric_regex: str | None = None,
    ) -> CommandResult:
        self._show(step=step)
        request = CommandRequest(
            loop_id=inp.loop_id, workspace=workspace, round=round_, step=step, command=command,
            last_error=last_error, limits=inp.spec.limits, sandbox=inp.spec.sandbox,
            metric_regex=metric_regex, expected_seconds=self._durations.get(step),
        )  # fmt: skip
        result = await loop_workspace.run_command(inp, request)
        self._durations[step] = result.duration_s
        return result

    async def _acquire(self, inp: LoopInput) -> WorkspaceHandle:
        # While the workspace is taken, its setup runs (or is restored) on the worker too.
        self._show(step=None, worker="", setup="setup: running" if inp.spec.sandbox.setup else "")
        workspace = await loop_workspace.acquire(inp, self._diff)
        self._setup = setup_line(workspace.setup) if workspace.setup else ""
        self._show(worker=workspace.worker, setup=self._setup)
        return workspace
