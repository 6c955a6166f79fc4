"""One playbook step as a child agent task: its agent (with the step's budget as its ceiling),
its prose with the event and upstream outputs filled in, and its declared output demanded.

An answer that does not validate is asked for once more, with the answer and what was wrong
with it; a second invalid answer fails the step with that reason. Child ids derive from the
run's id and the step's name (and `.retry` for the second asking), so a retried workflow
task never starts a second child. A child answers the run, never a surface (`parent`).

A step runs its agent's latest applied version, checked again when the step starts: with
`approval: agent`, an agent whose writes (native or MCP) are not all in its `require_for`
is refused (`openloop.playbook.agent_start`), so re-applying an agent with fewer approvals
never un-gates a playbook applied against the stricter one. With `approval: required`, every
write the task may offer waits for a person: its granted writing tools and, by name or glob,
its MCP servers' `writes` (listed only when the task starts).

A part of `workflows.playbook_run`, composed, not inherited. Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ChildWorkflowError, FailureError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from config.agent import AgentConfig
    from config.playbooks.agents import mcp_write_rules
    from workflows import search
    from workflows.activity_options import LOCAL_OPTIONS
    from workflows.delegate_tool import TeammateStart
    from workflows.playbook_calls import AgentLookup, PlaybookActivity
    from workflows.playbook_output import (
        OutputInvalid,
        output_demand,
        output_schema,
        parse_output,
        retry_request,
    )
    from workflows.playbook_template import fill
    from workflows.playbook_types import PlaybookRunInput, PlaybookStep, StepRun, StepStatus
    from workflows.task_basics import WORKFLOW_NAME, BudgetUsage, SurfaceContext, TaskStatus
    from workflows.types import TaskInput, TaskResult

from workflows.delegation import carved_agent


def why(err: FailureError) -> str:
    """A failed activity's or child's cause in words."""
    return str(err.cause or err)


def step_request(inp: PlaybookRunInput, step: PlaybookStep, outputs: Mapping[str, Mapping[str, Any]]) -> str:
    """What the step's agent is asked: the prose, filled in, and the answer's shape."""
    lines = [
        f"Playbook {inp.playbook.name}, step {step.name} (on {inp.event_name}).",
        fill(step.instructions.strip(), inp.event, outputs),
    ]
    if step.output:
        lines.append(output_demand(step.output))
    return "\n\n".join(lines)


def gated_agent(agent: AgentConfig, tools: list[str]) -> AgentConfig:
    """The agent with every write tool it has behind an approval (`approval: required`):
    `tools`, and its MCP write tools as `server.tool` rules the task's gate matches once listed."""
    approvals = agent.spec.approvals
    rules = {*approvals.require_for, *tools, *mcp_write_rules(agent)}
    gated = approvals.model_copy(update={"require_for": sorted(rules)})
    return agent.model_copy(update={"spec": agent.spec.model_copy(update={"approvals": gated})})


class StepRunner:
    def __init__(self, inp: PlaybookRunInput, run_id: str) -> None:
        self.inp = inp
        self.run_id = run_id

    async def run(self, step: PlaybookStep, state: StepRun, outputs: Mapping[str, Mapping[str, Any]]) -> None:
        """Run `step` to SUCCEEDED (its output in `state`) or FAILED (the reason in `state`)."""
        try:
            found: TeammateStart = await workflow.execute_local_activity(
                PlaybookActivity.AGENT,
                AgentLookup(agent=step.agent, approval=step.approval),
                result_type=TeammateStart,
                **LOCAL_OPTIONS,
            )
        except FailureError as err:  # a local activity's failure may come unwrapped
            self._fail(state, f"agent {step.agent!r} cannot run this step: {why(err)}")
            return
        request = step_request(self.inp, step, outputs)
        result = await self._ask(step, state, found, request, f"{self.run_id}.{step.name}")
        if result is None:
            return
        if not step.output:
            self._succeed(state, result.reply, {})
            return
        try:
            self._succeed(state, result.reply, parse_output(result.reply, step.output))
            return
        except OutputInvalid as invalid:
            state.attempts = 1
            problem = str(invalid)
        again = retry_request(request, result.reply, problem)
        result = await self._ask(step, state, found, again, f"{self.run_id}.{step.name}.retry")
        if result is None:
            return
        try:
            self._succeed(state, result.reply, parse_output(result.reply, step.output))
        except OutputInvalid as invalid:
            state.attempts = 2
            state.answer = result.reply
            self._fail(state, f"the answer did not have the declared output twice: {invalid}")

    async def _ask(
        self, step: PlaybookStep, state: StepRun, found: TeammateStart, request: str, task_id: str
    ) -> TaskResult | None:
        """One child task; None (and the step FAILED) when it did not end in an answer."""
        agent = found.agent
        if step.budget_usd is not None:
            left = max(0.0, step.budget_usd - state.cost_usd)
            agent = carved_agent(agent, left, agent.spec.limits.token_limit)
        if step.approval == "required":
            agent = gated_agent(agent, [tool.name for tool in found.tools if tool.writes])
        child = TaskInput(
            task_id=task_id,
            agent=agent,
            agent_version=found.version,
            context=SurfaceContext(
                "cli", f"playbook:{self.inp.playbook.name}", "playbook", None, self.run_id
            ),
            request=request,
            tools=found.tools,
            skills=found.skills,
            parent=self.run_id,
            output_schema=output_schema(step.output) if step.output else None,
        )
        state.task_id = task_id
        attributes = TypedSearchAttributes(
            [
                SearchAttributePair(search.AGENT, agent.name),
                SearchAttributePair(search.SURFACE, "playbook"),
                SearchAttributePair(search.PLAYBOOK, self.inp.playbook.name),
            ]
        )
        try:
            result: TaskResult = await workflow.execute_child_workflow(
                WORKFLOW_NAME,
                child,
                id=task_id,
                result_type=TaskResult,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                search_attributes=attributes,
                static_summary=f"{self.inp.playbook.name}: step {step.name} ({agent.name})",
            )
        except ChildWorkflowError as err:
            self._fail(state, f"task {task_id} failed: {why(err)}")
            return None
        self._charge(state, result.usage)
        if result.status != TaskStatus.SUCCESS:
            state.answer = result.reply
            self._fail(state, f"task {task_id} ended {result.status.value}: {result.reason}")
            return None
        return result

    @staticmethod
    def _charge(state: StepRun, usage: BudgetUsage) -> None:
        state.cost_usd = round(state.cost_usd + usage.cost_usd, 6)
        state.tokens += usage.prompt_tokens + usage.completion_tokens

    @staticmethod
    def _succeed(state: StepRun, answer: str, output: dict[str, Any]) -> None:
        state.status, state.answer, state.output, state.reason = StepStatus.SUCCEEDED, answer, output, ""

    @staticmethod
    def _fail(state: StepRun, reason: str) -> None:
        state.status, state.reason = StepStatus.FAILED, reason
