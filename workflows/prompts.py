"""The messages a task starts with: the agent's own instructions, then the request.

Pure. The system prompt holds only the agent's instructions, who it answers and the rule
for untrusted data. Recalled memories are outside content like any tool result (a memory
may hold text a tool once returned): they go in a user-role message, inside an
untrusted-data block, each with where it came from.
"""

from __future__ import annotations

from collections.abc import Sequence

from config.agent import AgentConfig
from workflows.types import MemoryItem, SkillRef, SurfaceContext
from workflows.untrusted import UNTRUSTED_DATA_RULE, wrap_untrusted

MEMORIES_HEADER = "Memories recalled from this"
SKILLS_HEADER = "Skills you can load with skill.load(name) when a task needs one:"
BOUND_REPOS_LINE = "Your GitHub repositories (where your GitHub tools act):"


def system_prompt(agent: AgentConfig, context: SurfaceContext, skills: Sequence[SkillRef] = ()) -> str:
    return (
        f"{agent.spec.instructions.strip()}\n\n"
        f"You are the agent '{agent.name}' answering {context.user} on {context.surface}"
        f" in {context.channel}.\n\n"
        + (f"{BOUND_REPOS_LINE} {', '.join(gh.repos)}.\n\n" if (gh := agent.spec.surfaces.github) else "")
        + skills_section(skills)
        + UNTRUSTED_DATA_RULE
    )


def skills_section(skills: Sequence[SkillRef]) -> str:
    """Each skill's name and description only: the model loads one with skill.load."""
    if not skills:
        return ""
    listed = "\n".join(f"- {skill.name}: {skill.description}" for skill in skills)
    return f"{SKILLS_HEADER}\n{listed}\n\n"


def recalled_memories(items: list[MemoryItem], scope: str) -> str:
    """One message with every recalled memory and its provenance, as data."""
    lines = [
        f"- saved {item.created_at_iso[:10]}"
        + (f" by task {item.source_task_id}" if item.source_task_id else "")
        + f": {item.content}"
        for item in items
    ]
    body = "\n".join(lines)
    return (
        f"{MEMORIES_HEADER} {scope} scope (saved earlier with memory.save; they may quote tool "
        f"results or other people):\n{wrap_untrusted(body, f'memory:{scope}')}"
    )
