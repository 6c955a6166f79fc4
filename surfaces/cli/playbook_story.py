"""A playbook run's story, for `openloop playbooks show RUN` and `openloop explain RUN`.

A run is a `PlaybookRunWorkflow` whose steps are child agent tasks, so its story is its stored
record (event, steps, outputs, costs, reasons; a running run's steps from its `progress`
query) with each step's task read the way `openloop tasks show` reads a task: from its
history, with its own children (`surfaces.cli.task_tree`), and, while it runs, from the task
itself (what it waits for, who can move it on). Drawn as a tree in the steps' running order:
the run, each step with its status, cost, output and reason, and under it its task. A step the
offline model answered (no provider key) says so, with the fields it could not know, and so do
the run's reason and, when one made it fail, what to do next.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.markup import escape
from rich.tree import Tree
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from activities.offline.playbook import offline_unknowns
from activities.store import playbooks as playbook_rows
from surfaces.cli.task_tree import TaskNode, draw_tree, load_tree
from surfaces.cli.terminal import commands
from surfaces.task_lookup import ask_task, while_running
from surfaces.timeline import EntryKind, story_from_history
from surfaces.timeline_children import TaskRole
from workers import history as histories
from workflows import search
from workflows.playbook_calls import RunRecord
from workflows.playbook_types import PlaybookRunStatus, StepRun, StepStatus

__all__ = [
    "RUN_PREFIX",
    "RunStory",
    "StepTask",
    "draw_run",
    "find_run_story",
    "offline_note",
    "print_explained",
    "progress",
    "read_run_story",
]

RUN_PREFIX = "playbook-"  # every run's id starts so (`activities.playbooks.starts`)
COLOURS = {"SUCCEEDED": "green", "FAILED": "red", "SKIPPED": "yellow", "RUNNING": "cyan", "PENDING": "dim"}
CONNECT_TIMEOUT_S = 5.0


@dataclass
class StepTask:
    step: StepRun
    task: TaskNode | None  # the step's child task and its own children; None before it started
    doing: str = ""  # a running task's live state: "waiting for cli:local to approve …"
    action: str = ""  # what would move it on


@dataclass
class RunStory:
    record: RunRecord
    steps: list[StepTask]
    reason: str
    action: str


async def progress(client: Client, run_id: str) -> list[StepRun] | None:
    """A running run's steps from its `progress` query; None when it is not running."""
    handle = client.get_workflow_handle(run_id)
    try:
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            return None
        return await handle.query("progress", result_type=list[StepRun])
    except RPCError:
        return None


async def _step_task(client: Client, step: StepRun) -> StepTask:
    if not step.task_id:
        return StepTask(step, None)
    try:
        events = (await histories.fetch_history(client, step.task_id)).events
        description = await client.get_workflow_handle(step.task_id).describe()
    except RPCError:
        return StepTask(step, None)
    node = await load_tree(client, step.task_id, story_from_history(events), TaskRole.STEP)
    if description.status != WorkflowExecutionStatus.RUNNING:
        return StepTask(step, node)
    asked = await ask_task(client, step.task_id, description.task_queue)
    if asked is None:
        return StepTask(step, node, "no worker is running to ask", "Start a worker (`openloop up`).")
    surface = description.typed_search_attributes.get(search.SURFACE) or ""
    doing, action = while_running(asked[1], surface)
    return StepTask(step, node, doing, action)


def offline_note(step: StepRun) -> str:
    """What a step the offline model answered says of itself: "" when it answered no such step."""
    unknown = offline_unknowns(step.answer)
    if unknown is None:
        return ""
    said = "answered by the offline model (no model provider)"
    if not unknown:
        return f"{said}, from what it read or was given"
    return f"{said}, which could not know {', '.join(unknown)}"


def _now(record: RunRecord, steps: list[StepTask]) -> tuple[str, str]:
    """Why the run is where it is, and what would move it on."""
    reason, action = _where(record, steps)
    if record.status is PlaybookRunStatus.RUNNING:
        return reason, action
    failed = next((s.step for s in steps if s.step.status is StepStatus.FAILED), None)
    unknown = offline_unknowns(failed.answer) if failed is not None else None
    if unknown:  # a field only a model with a provider could fill may be why it failed
        return (
            f"{reason} (answered offline: the offline model cannot know {', '.join(unknown)})",
            "Give the step's agent a model with a provider key (`openloop doctor` says which key "
            "is missing), then send the event again or trigger the schedule.",
        )
    offline = [s.step.name for s in steps if offline_unknowns(s.step.answer) is not None]
    if offline:
        reason += f" (answered offline: {', '.join(offline)})"
    return reason, action


def _where(record: RunRecord, steps: list[StepTask]) -> tuple[str, str]:
    if record.status is PlaybookRunStatus.RUNNING:
        waiting = next((s for s in steps if s.doing), None)
        if waiting is not None:
            return f"step {waiting.step.name}: {waiting.doing}", waiting.action
        running = [s.step.name for s in steps if s.step.status is StepStatus.RUNNING]
        return (
            f"running step(s) {', '.join(running) or '(none yet)'}",
            f"Nothing: it is working (`openloop playbooks show {record.run_id}` follows it).",
        )
    if record.status is PlaybookRunStatus.FAILED:
        failed = next((s for s in steps if s.step.status is StepStatus.FAILED), None)
        if failed is not None and failed.step.task_id:
            return record.reason, f"See why its task stopped: `openloop explain {failed.step.task_id}`."
        return record.reason, "Fix what the reason names, then send the event again or trigger the schedule."
    return record.reason or "every step succeeded", ""


async def read_run_story(pool: AsyncConnectionPool, client: Client, run_id: str) -> RunStory | None:
    """The run's story, None when no run has this id."""
    run = await playbook_rows.get_run(pool, run_id)
    if run is None:
        return None
    live = await progress(client, run_id)
    record = run.record.model_copy(update={"steps": live}) if live is not None else run.record
    steps = [await _step_task(client, step) for step in record.steps]
    reason, action = _now(record, steps)
    return RunStory(record, steps, reason, action)


async def find_run_story(database_url: str | None, client: Client, run_id: str) -> RunStory | None:
    """The story of the playbook run `run_id`, None when it is no run's id or there is no database
    to read runs from (the caller then treats the id as a task's)."""
    if not database_url or not run_id.startswith(RUN_PREFIX):
        return None
    try:
        async with AsyncConnectionPool(
            database_url,
            min_size=1,
            max_size=2,
            kwargs={"autocommit": True, "row_factory": dict_row},
            open=False,
        ) as pool:
            await pool.wait(timeout=CONNECT_TIMEOUT_S)
            return await read_run_story(pool, client, run_id)
    except (psycopg.Error, TimeoutError):
        return None


def _status(value: str) -> str:
    return f"[{COLOURS.get(value, 'white')}]{escape(value)}[/]"


def draw_run(story: RunStory) -> Tree:
    """The run and its steps in running order: status, cost and tokens, output, reason, and the
    step's task (agent, status, model steps, cost) with what it waits for while it runs."""
    record = story.record
    tree = Tree(
        f"[bold]{escape(record.run_id)}[/bold]  {escape(record.playbook)} v{record.version} · "
        f"{_status(record.status.value)} · on {escape(record.event_name)} · ${record.cost_usd:.4f}"
    )
    for number, item in enumerate(story.steps, 1):
        step = item.step
        branch = tree.add(
            f"{number}. [bold]{escape(step.name)}[/bold]  {_status(step.status.value)} · "
            f"${step.cost_usd:.4f} · {step.tokens} tokens"
            + (f" · {step.attempts} answer(s) did not validate" if step.attempts else "")
            + (" · [yellow]answered offline[/]" if offline_unknowns(step.answer) is not None else "")
        )
        if item.task is not None:
            _draw_task(item.task, branch)
        elif step.task_id:
            branch.add(f"task {escape(step.task_id)} (its history could not be read)")
        if item.doing:
            branch.add(f"now      {escape(item.doing)}")
        if step.output:
            branch.add(f"output  {escape(json.dumps(step.output, ensure_ascii=False))}")
        if step.reason:
            branch.add(f"reason  {escape(step.reason)}")
        note = offline_note(step)
        if note:
            branch.add(f"offline {escape(note)}")
    return tree


def _draw_task(task: TaskNode, branch: Tree) -> None:
    """The step's task, the approvals asked and decided in it, and the tasks it started."""
    node = branch.add(
        f"task {escape(task.task_id)} · agent {escape(task.agent)} · {escape(task.status)} · "
        f"{task.steps} model step(s) · ${task.story.cost_usd:.4f}"
    )
    for entry in task.story.entries:
        if entry.kind is EntryKind.APPROVAL:
            node.add(f"approval: {escape(entry.what)}")
    for child in task.children:  # its subagents and teammates, drawn as `tasks show` draws them
        draw_tree(child, node)
    if task.left_out:
        node.add(f"[dim]… {task.left_out} more not shown[/dim]")


def print_explained(story: RunStory, out: Console) -> None:
    """`openloop explain RUN`: status, reason, next action, then the steps' story."""
    record = story.record
    out.print(f"[bold]{escape(record.run_id)}[/bold]: {record.status.value}")
    out.print(
        f"Playbook {escape(record.playbook)} v{record.version} on {escape(record.event_name)} "
        f"(key {escape(record.run_key)}, depth {record.depth}), ${record.cost_usd:.4f}"
    )
    out.print(f"Reason: {escape(story.reason or '–')}")
    out.print(f"Next: {escape(commands(story.action) if story.action else '–')}")
    out.print("Steps (in running order, each a task):")
    out.print(draw_run(story), soft_wrap=False)
