"""The tool runner: validate, permit, bound, approve and run each tool call of a task.

Workflow code: deterministic, no I/O. Every check reads the `ToolSpec`s the task started
with. A refused call is audited and explained to the model; a gated call waits for an
approval bound to its exact arguments; an allowed one goes to the dispatch
(`workflows.tool_dispatch`), which knows who runs it. A step whose calls are all valid,
allowed, read-only local tools needing no approval is folded: the calls run inside the next
model call, saving each its own round trip.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows import policy
    from workflows.tool_catalog import catalog_tool_name, model_tool_name
    from workflows.types import (
        ApprovalRecord,
        CarriedState,
        FoldedToolCall,
        FoldedTools,
        TaskStatus,
        ToolCall,
        ToolCallInput,
        ToolCallResult,
    )

from workflows.approvals import ApprovalGate, GateDecision
from workflows.conversation import Conversation
from workflows.task_record import Cancellation, TaskStop, failure_reason
from workflows.task_tree import past_depth
from workflows.tool_dispatch import ToolDispatch
from workflows.workflow_tool import TaskParts


class ToolRunner:
    def __init__(
        self,
        task: TaskParts,
        dispatch: ToolDispatch,
        conversation: Conversation,
        gate: ApprovalGate,
        cancellation: Cancellation,
        carried: CarriedState,
    ) -> None:
        self.inp = task.inp
        self.agent = task.inp.agent
        self.tools = task.tools
        self.record = task.record
        self.meter = task.meter
        self.delegation = task.delegation
        self.workspace = task.workspace
        self.memory = task.workspace.memory
        self.dispatch = dispatch
        self.conversation = conversation
        self.gate = gate
        self.cancellation = cancellation
        # Of each call's tool, arguments and result; and the calls waiting to run inside the
        # next model call: both carried over from the task's previous run.
        self.signatures: list[str] = list(carried.progress_signatures)
        self.folded: list[FoldedToolCall] = list(carried.folded_tools)

    @property
    def names(self) -> list[str]:
        """The tools the model is offered: the granted native ones in the order the agent's
        config lists them, then the others (MCP tools listed at the task's start, skills,
        delegation, opening a workspace); the code tools only while a workspace is open."""
        native = [
            grant.name
            for grant in self.agent.spec.tools
            if (spec := self.tools.get(grant.name)) is not None and spec.native and self.dispatch.offers(spec)
        ]
        others = [spec.name for spec in self.tools.specs if not spec.native and self.dispatch.offers(spec)]
        return native + others

    async def handle_all(self, calls: list[ToolCall]) -> list[str]:
        """Each call's outcome, in order. Delegations needing no approval run in parallel,
        a few at a time, sharing what the budget has left; anything else runs in turn."""
        names = [catalog_tool_name(call.name) for call in calls]
        parallel = len(calls) > 1 and all(
            self.dispatch.in_parallel(name) and not policy.needs_approval(self.agent, name) for name in names
        )
        if not parallel:
            return [await self.handle(call, position) for position, call in enumerate(calls)]
        outcomes: list[str] = []
        cap = self.agent.spec.subagents.max_parallel
        for start in range(0, len(calls), cap):
            batch = list(enumerate(calls))[start : start + cap]
            share = len(calls) - start  # the rest of the calls share what is left
            outcomes += await asyncio.gather(
                *(self.handle(call, position, share) for position, call in batch)
            )
        return outcomes

    async def handle(self, call: ToolCall, position: int, share: int = 1) -> str:
        """Validate, authorise, maybe wait for approval, run. Returns ok|invalid|refused|denied|failed."""
        name = catalog_tool_name(call.name)
        check = policy.check_tool_call(self.agent, self.tools.get(name), name, call.arguments)
        had = [grant.name for grant in self.agent.spec.tools] + [spec.name for spec in self.inp.tools]
        check = past_depth(check, self.inp, name, had)
        check = policy.taken_by_skill(check, name, had, self.inp.skills, self.names)
        key = self._key(call, position, name, check.arguments)
        if check.allowed:  # writes only to the agent's own channels and repositories
            check = policy.check_write_target(self.agent, check, self.inp.context)
        if not check.allowed:
            self._tell_model(call, f"Error: {check.problem}")
            self.record.record("refused", f"{name}: {check.problem}")
            await self.gate.audit(self.record.step, key, "tool_refused", name, check.arguments, check.problem)
            return "invalid" if check.kind == "invalid" else "refused"
        spec = check.definition
        if spec is not None and spec.always_gated:
            return await self._propose(call, key, name, check.arguments)
        approval = None
        if policy.needs_approval(self.agent, name):
            decision = await self._approval(key, name, check.arguments)
            if decision.record is None:
                self._tell_model(call, f"The approver {decision.by} denied this action; do not retry it.")
                return "denied"
            approval = decision.record
        return await self._run(call, key, name, check.arguments, approval, share)

    async def _propose(self, call: ToolCall, key: str, name: str, arguments: dict[str, object]) -> str:
        """A pull request: a person approves the exact diff; when the workspace changed while
        they decided, that approval is void and a new request shows the new diff."""
        for attempt in range(policy.MAX_PROPOSALS):
            proposal = await self.workspace.proposal(arguments, self.meter.usage.cost_usd)
            if not isinstance(proposal, dict):
                self._tell_model(call, proposal.output)
                self.record.record("tool", f"{name}: {proposal.error_kind}: {proposal.output[:120]}")
                return "failed"
            decision = await self._approval(f"{key}:{attempt}" if attempt else key, name, proposal)
            if decision.record is None:
                self._tell_model(call, f"The approver {decision.by} denied this action; do not retry it.")
                return "denied"
            if await self.workspace.still_current(str(proposal["diff_sha256"])):
                return await self._run(call, key, name, proposal, decision.record)
            self.record.decide(f"the workspace changed after {name} was approved; that approval is void")
            await self.gate.audit(
                self.record.step, f"{key}:void:{attempt}", "approval_void", name, proposal, "void"
            )
        raise TaskStop(TaskStatus.ERROR, f"the workspace kept changing while {name} waited for approval")

    def _key(self, call: ToolCall, position: int, name: str, arguments: dict[str, object]) -> str:
        """What names this call in idempotency keys, audit rows and approval requests: its
        position, tool and arguments, never the provider's call id."""
        return policy.call_key(position, name, arguments or call.arguments)

    async def _approval(self, key: str, name: str, arguments: dict[str, object]) -> GateDecision:
        """Wait for a decision: approved (with its record) or denied and the task goes on."""
        self.record.set_status(TaskStatus.WAITING_APPROVAL)
        self.record.last_action = f"waiting for approval of {name}"
        await self.delegation.tell_parent(name)  # a subagent's parent shows the wait
        waited_from = workflow.now()
        # The card names the model that asked for this call, not the policy's first choice.
        model = self.record.last_model or self.agent.spec.model_policy.models_for(self.inp.task_kind)[0]
        decision = await self.gate.request(
            self.record.step, key, name, arguments, model, cancelled=lambda: self.cancellation.requested
        )
        self.meter.waited((workflow.now() - waited_from).total_seconds())
        await self.delegation.tell_parent("")
        self.record.set_status(TaskStatus.RUNNING)
        self.cancellation.check()
        if decision.outcome == "expired":
            raise TaskStop(
                TaskStatus.APPROVAL_EXPIRED, f"nobody approved {name} within {self.agent.spec.approvals.ttl}"
            )
        if decision.outcome == "denied":
            self.record.record("approval", f"{name} denied by {decision.by}", actor=decision.by)
            if self.agent.spec.approvals.on_denied == "stop":
                raise TaskStop(TaskStatus.APPROVAL_DENIED, f"{decision.by} denied {name}")
            self.record.decide(f"{decision.by} denied {name}; the task went on without it")
            return GateDecision("denied", decision.by)
        self.record.record("approval", f"{name} approved by {decision.by}", actor=decision.by)
        return decision

    async def _run(
        self,
        call: ToolCall,
        key: str,
        name: str,
        arguments: dict[str, object],
        approval: ApprovalRecord | None,
        share: int = 1,
    ) -> str:
        self.record.last_action = f"running {name}"
        tool_input = ToolCallInput.for_call(
            self.inp.task_id, self.record.step, key, name, arguments, self.inp.context, self.memory, approval
        )
        try:
            result = await self.dispatch.run(self.tools.get(name), tool_input, key, share)
        except ActivityError as err:
            result = ToolCallResult(ok=False, output=f"Error: {failure_reason(err)}", error_kind="failed")
        self._tell_model(call, result.output, result.output_ref)
        self._ran(name, arguments, result)
        return "ok" if result.ok else "failed"

    def _tell_model(self, call: ToolCall, content: str, ref: str | None = None) -> None:
        self.conversation.add_tool_result(
            call.id, model_tool_name(catalog_tool_name(call.name)), content, ref
        )

    def _ran(
        self, name: str, arguments: dict[str, object], result: ToolCallResult, step: int | None = None
    ) -> None:
        self.signatures.append(policy.progress_signature(name, arguments, result.output))
        self.record.record(
            "tool", f"{name}: {'ok' if result.ok else result.error_kind}: {result.output[:120]}", step=step
        )

    def check_progress(self) -> None:
        repeats = policy.repeats_at_end(self.signatures)
        if repeats >= self.agent.spec.limits.no_progress_repeats:
            raise TaskStop(
                TaskStatus.NO_PROGRESS,
                f"the same tool call returned the same result {repeats} times in a row",
            )

    # Folding ---------------------------------------------------------------------------

    def fold(self, calls: list[ToolCall]) -> bool:
        """Queue the step's calls to run inside the next model call when every one is a
        valid, allowed, read-only local tool that needs no approval and none could complete
        a no-progress streak (that is checked before the next call)."""
        if policy.repeats_at_end(self.signatures) + len(calls) >= self.agent.spec.limits.no_progress_repeats:
            return False
        folded = []
        for position, call in enumerate(calls):
            name = catalog_tool_name(call.name)
            spec = self.tools.get(name)
            if (
                spec is None
                or not self.dispatch.folds(spec)
                or spec.writes
                or policy.needs_approval(self.agent, name)
            ):
                return False
            check = policy.check_tool_call(self.agent, spec, name, call.arguments)
            if not check.allowed:
                return False
            folded.append((position, call, name, check.arguments))
        queued = [
            FoldedToolCall(self.record.step, self._key(call, position, name, arguments), name, arguments)
            for position, call, name, arguments in folded
        ]
        self.folded.extend(queued)
        self.record.last_action = f"running {', '.join(c.tool for c in queued)} with the next model call"
        return True

    def folded_input(self) -> FoldedTools | None:
        return FoldedTools(list(self.folded), self.inp.context, self.memory) if self.folded else None

    def folded_ran(self, run: FoldedTools, results: list[ToolCallResult]) -> None:
        self.folded.clear()
        for call, outcome in zip(run.calls, results, strict=True):
            self._ran(call.tool, call.arguments, outcome, step=call.step)
        self.check_progress()
