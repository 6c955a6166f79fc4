"""A task and the tasks it started (subagents and teammates), read from their histories.

`openloop tasks show` draws the tree (each child with its agent, kind, status, steps and
cost) and, like `openloop explain`, tells the parent's story with every child's steps in
it; the total cost is then the tree's. Each history is read once; a running child's status
comes from its `OpenLoopStatus` search attribute, so no worker needs to answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.markup import escape
from rich.tree import Tree
from temporalio.client import Client
from temporalio.service import RPCError

from surfaces.timeline import Story, story_from_history
from surfaces.timeline_children import TaskRole, with_children
from workers import history as histories
from workflows import search

MAX_DEPTH = 3  # subagents do not delegate again; a teammate's own children are the deepest
MAX_CHILDREN = 64  # per task: a tree wider than this is cut, and says so


@dataclass
class TaskNode:
    task_id: str
    kind: TaskRole
    agent: str
    status: str
    story: Story
    children: list[TaskNode] = field(default_factory=list)
    left_out: int = 0  # children not read (too deep or too many)

    @property
    def steps(self) -> int:
        if self.story.result is not None:
            return self.story.result.steps
        return max((entry.step for entry in self.story.entries if entry.step is not None), default=0)

    def stories(self) -> dict[str, Story]:
        """Every task's story in the tree, by id."""
        found = {self.task_id: self.story}
        for child in self.children:
            found.update(child.stories())
        return found

    @property
    def tree_cost_usd(self) -> float:
        return self.story.cost_usd + sum(child.tree_cost_usd for child in self.children)


def status_of_story(story: Story, recorded: str | None) -> str:
    if story.result is not None:
        return story.result.status.value
    if story.closed:
        return story.closed.upper()
    return recorded or "RUNNING"


async def load_tree(
    client: Client, task_id: str, story: Story, kind: TaskRole = TaskRole.TASK, depth: int = 0
) -> TaskNode:
    """The task (whose story is read already) with its children's, recursively."""
    recorded = None
    if story.result is None and not story.closed:
        try:
            attrs = (await client.get_workflow_handle(task_id).describe()).typed_search_attributes
            recorded = attrs.get(search.STATUS)
        except RPCError:
            recorded = None
    agent = story.task.agent.name if story.task is not None else "?"
    node = TaskNode(task_id, kind, agent, status_of_story(story, recorded), story)
    runs = story.children if depth < MAX_DEPTH else []
    node.left_out = len(story.children) - min(len(runs), MAX_CHILDREN)
    for child in runs[:MAX_CHILDREN]:
        try:
            events = (await histories.fetch_history(client, child.task_id)).events
        except RPCError:
            node.left_out += 1
            continue
        node.children.append(
            await load_tree(client, child.task_id, story_from_history(events), child.kind, depth + 1)
        )
    return node


def rolled_up(node: TaskNode) -> Story:
    """The task's story with every child's steps in it, and the tree's cost."""
    return with_children(node.story, node.stories())


def _line(node: TaskNode) -> str:
    cost = f"${node.story.cost_usd:.4f}"
    return (
        f"[bold]{escape(node.task_id)}[/bold]  {node.kind} · agent {escape(node.agent)} · "
        f"{escape(node.status)} · {node.steps} step(s) · {cost}"
    )


def draw_tree(node: TaskNode, tree: Tree | None = None) -> Tree:
    """Each task of the tree with its kind, agent, status, steps and own cost."""
    branch = Tree(_line(node)) if tree is None else tree.add(_line(node))
    for child in node.children:
        draw_tree(child, branch)
    if node.left_out:
        branch.add(f"[dim]… {node.left_out} more not shown[/dim]")
    return branch
