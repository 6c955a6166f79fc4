"""Finding the task that runs in a Slack thread, and a bounded key memory.

`WaitingTasks` lists the channel's running Slack tasks (search attributes) and reads each
one's thread from its start input once: a message in that thread steers the task, whether it
works or waits for an answer. `RecentKeys` is the bounded memory it
and the dispatcher keep (oldest forgotten first).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

from temporalio.client import Client, WorkflowHandle

from workflows import search
from workflows.agent_task import AgentTaskWorkflow
from workflows.types import TaskInput

RECENT_EVENTS = 10_000
_SLACK_ID = re.compile(r"^[A-Z0-9_]+$")


class RecentKeys(OrderedDict[str, object]):
    """A bounded memory of recent keys (oldest forgotten first): event ids whose effect is
    not keyed by the event, and threads of tasks already looked at."""

    def __init__(self, size: int = RECENT_EVENTS):
        super().__init__()
        self._size = size

    def remember(self, key: str, value: object = None) -> None:
        self[key] = value
        while len(self) > self._size:
            self.popitem(last=False)


class WaitingTasks:
    """Finds the task running in a thread of a surface (Slack's by default; Discord's too):
    working, or waiting for an answer, an approval or a budget extension.

    Tasks are keyed by the mention's event id, not the thread, so the running tasks of the
    channel are listed (search attributes) and each one's thread is read from its start
    input once and remembered.
    """

    MAX_CANDIDATES = 50

    def __init__(self, temporal: Client, surface: str = "slack"):
        self.temporal = temporal
        self.surface = surface
        self._threads = RecentKeys()

    async def find(self, channel: str, thread: str) -> WorkflowHandle[Any, Any] | None:
        if not _SLACK_ID.match(channel):
            return None
        query = (
            f"{search.CHANNEL.name} = '{channel}' AND {search.SURFACE.name} = '{self.surface}' "
            "AND ExecutionStatus = 'Running'"
        )
        async for execution in self.temporal.list_workflows(query, limit=self.MAX_CANDIDATES):
            if await self._thread_of(execution.id) == thread:
                return self.temporal.get_workflow_handle_for(AgentTaskWorkflow.run, execution.id)
        return None

    async def _thread_of(self, workflow_id: str) -> str | None:
        if workflow_id not in self._threads:
            handle = self.temporal.get_workflow_handle(workflow_id)
            thread: str | None = None
            async for event in handle.fetch_history_events(page_size=1):
                started = event.workflow_execution_started_event_attributes
                [inp] = await self.temporal.data_converter.decode(list(started.input.payloads), [TaskInput])
                # A subagent shares its parent's thread; the parent is the one to steer.
                thread = inp.context.thread if inp.parent is None else None
                break
            self._threads.remember(workflow_id, thread)
        known = self._threads.get(workflow_id)
        return known if isinstance(known, str) else None
