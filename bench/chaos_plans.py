"""The chaos workload: what each kind of run does, and the model that plays it.

Every run is an agent task whose request carries a mark (`[chaos issue r004]`); the model
reads the mark and how many tool turns the conversation already holds, and answers the next
turn of that kind's plan. So an answer depends only on the task's own conversation — never
on which of the concurrent tasks asked first — and a retried or replayed call is answered
as the first was: an undisturbed run and a disturbed one are asked the same things.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from config.agent import AgentConfig
from tests.fakes.model_api import Recorded, Scripted, tool_call
from tests.fakes.model_stream import StreamPlan
from workflows.playbook_types import (
    CompiledPlaybook,
    FieldKind,
    PlaybookStep,
    Trigger,
    TriggerKind,
    TypedField,
)

KINDS = ("approval", "issue", "mcp", "tree", "code", "loop", "slack", "playbook")
SLACK_CHANNEL = "C0CHAOS"  # a Slack-surface run is asked and answered in a thread here
NEEDS_APPROVAL = {"approval", "issue", "code"}
APPROVER = "chaos:approver"
LOOP = "keep-green"
SLOW_LOOP = "slow-green"  # its verify outlasts a worker's grace period
PYTEST = "python -m pytest -q -p no:cacheprovider"
FIX = {"path": "calc.py", "old": "/ (len(values) + 1)", "new": "/ len(values)"}
_MARK = re.compile(r"\[chaos (\w+) ([\w-]+)\]")

Turn = list[tuple[str, dict[str, Any]]] | str


def request(kind: str, key: str) -> str:
    return f"[chaos {kind} {key}] Please do the {kind} task {key}."


def plan(kind: str, key: str, repo: str) -> list[Turn]:
    """The turns of a run: tool calls (one turn may hold several), then its answer."""
    if kind == "approval":
        return [[("memory__save", {"content": f"chaos fact {key}"})], f"Saved {key}."]
    if kind == "issue":
        return [[("github__create_issue", {"repo": repo, "title": f"chaos {key}"})], f"Opened {key}."]
    if kind == "mcp":
        return [[("notes__create_note", {"title": f"chaos-{key}", "body": key})], f"Noted {key}."]
    if kind == "tree":
        parts = [("agent__delegate", {"task": f"[chaos child {key}-{n}] Check part {n}."}) for n in (1, 2)]
        return [parts, f"Both parts of {key} checked."]
    if kind == "slack":  # asked in a Slack thread: its answer streams there, once
        return [f"The thread of {key} is summarised."]
    if kind == "pbstep":  # a playbook step: its declared output, whatever the step
        return ['Checked.\n\n{"ok": true}']
    if kind == "child":
        return [f"Part {key} is fine."]
    if kind in ("loop", "slowloop"):
        loop = LOOP if kind == "loop" else SLOW_LOOP
        return [[("loop__start", {"loop": loop})], f"Started the loop for {key}."]
    if kind == "slowmcp":
        return [[("notes__slow", {"seconds": 4})], f"Waited for the notes of {key}."]
    if kind == "slowcode":  # its command outlasts a worker's grace period
        return [
            [("code__open_workspace", {"repo": repo})],
            [("code__edit_file", FIX)],
            [("code__run", {"command": f"sleep 15 && {PYTEST}"})],
            [("github__create_pull_request", {"title": f"chaos {key}", "body": "Divide by n."})],
            f"Proposed {key}.",
        ]
    if kind == "code":
        return [
            [("code__open_workspace", {"repo": repo})],
            [("code__edit_file", FIX)],
            [("code__run_tests", {})],
            [("github__create_pull_request", {"title": f"chaos {key}", "body": "Divide by n."})],
            f"Proposed {key}.",
        ]
    raise ValueError(f"no plan for {kind!r}")


def respond(repo: str, delay: float = 0.0, piece_delay: float = 0.0) -> Callable[[Recorded], Scripted | None]:
    """The fake model's answer to a request, from the task's own conversation, `delay`
    seconds after it was asked; a streamed answer's pieces `piece_delay` apart."""

    def answer(recorded: Recorded) -> Scripted | None:
        messages = recorded.body.get("messages") or []
        found = next(
            (
                m
                for msg in messages
                if msg.get("role") == "user" and (m := _MARK.search(str(msg.get("content"))))
            ),
            None,
        )
        if found is None:
            return Scripted(content="No chaos mark in this conversation.")
        kind, key = found.groups()
        taken = sum(1 for msg in messages if msg.get("role") == "assistant" and msg.get("tool_calls"))
        turns = plan(kind, key, repo)
        turn = turns[min(taken, len(turns) - 1)]
        if isinstance(turn, str):
            return Scripted(
                content=turn, delay=delay, stream=StreamPlan(chunk_chars=4, chunk_delay=piece_delay)
            )
        calls = [tool_call(f"call_{key}_{taken}_{n}", name, args) for n, (name, args) in enumerate(turn)]
        return Scripted(content=None, tool_calls=calls, delay=delay)

    return answer


def chaos_agent(repo: str, mcp_state: Path) -> AgentConfig:
    code = ("open_workspace", "read_file", "search", "diff", "edit_file", "run_tests", "run")
    permissions = {
        "open_workspace": "read",
        "read_file": "read",
        "search": "read",
        "diff": "read",
        "edit_file": "write",
    }
    tools = [
        {"name": "memory.save", "permissions": ["memory:write"]},
        {"name": "github.create_issue", "permissions": ["issues:write"], "limit_to": [repo]},
        {"name": "loop.start", "permissions": ["loops:run"], "limit_to": [LOOP, SLOW_LOOP]},
        {"name": "agent.delegate", "permissions": ["agents:delegate"]},
        *({"name": f"code.{tool}", "permissions": [f"code:{permissions.get(tool, 'run')}"]} for tool in code),
        {"name": "github.create_pull_request", "permissions": ["pulls:write"]},
    ]
    notes = [sys.executable, "-m", "tests.fakes.mcp_servers", "stdio", str(mcp_state)]
    return AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": "chaos"},
            "spec": {
                "model_policy": {"default": "openai/gpt-4o-mini", "max_output_tokens": 256},
                "surfaces": {"github": {"repos": [repo]}, "slack": {"channels": [SLACK_CHANNEL]}},
                "tools": tools,
                "mcp_servers": [
                    {
                        "name": "notes",
                        "transport": "stdio",
                        "command": notes,
                        "allow": ["create_note", "slow"],
                        "writes": ["create_note"],
                    },  # fmt: skip
                ],
                "approvals": {"require_for": ["memory.save", "github.create_issue"], "approvers": [APPROVER]},
                "coding": {"verify": PYTEST, "limits": {"command_timeout": "2m", "memory": "1Gi"}},
                "budget": {"per_task_usd": 5.0},
                "limits": {"max_iterations": 20, "wall_clock": "2h"},
            },
        }
    )


def loop_file(repo: str, name: str = LOOP, verify: str = PYTEST) -> str:
    """A loop whose fix is one command (no model): it repairs the demo project's mean()."""
    return textwrap.dedent(
        f"""\
        apiVersion: openloop.ai/v1alpha1
        kind: Loop
        metadata: {{name: {name}}}
        spec:
          mission: {{objective: Keep the tests green}}
          repo: {{github: {repo}, base: main}}
          commands:
            fix: sed -i 's#/ (len(values) + 1)#/ len(values)#' calc.py
            verify: {verify}
        """
    )


FAN, TAIL = "chaos-fan", "chaos-tail"  # a playbook run of the workload, and the one it emits


def chaos_playbooks() -> list[CompiledPlaybook]:
    """Two steps in parallel and a join that emits `chaos.done`, which starts the second."""
    ok = (TypedField(name="ok", kind=FieldKind.BOOL),)

    def step(name: str, after: tuple[str, ...] = (), emits: str | None = None) -> PlaybookStep:
        text = f"[chaos pbstep {name}] Check part {name}."
        return PlaybookStep(  # its writes would wait for a person; it makes none
            name=name,
            agent="chaos",
            instructions=text,
            after=after,
            output=ok,
            emits=emits,
            approval="required",
        )

    def compiled(name: str, event: str, *steps: PlaybookStep) -> CompiledPlaybook:
        trigger = Trigger(kind=TriggerKind.EVENT, event=event)
        made_of = json.dumps([trigger.model_dump(mode="json"), [s.model_dump(mode="json") for s in steps]])
        digest = hashlib.sha256(made_of.encode()).hexdigest()
        return CompiledPlaybook(name=name, trigger=trigger, steps=steps, content_hash=digest)

    fan = compiled(FAN, "chaos.go", step("a"), step("b"), step("join", ("a", "b"), "chaos.done"))
    return [fan, compiled(TAIL, "chaos.done", step("tail"))]
