"""The two tools that read an agent's skills, declared once, and their activity's input.

Progressive disclosure: the system prompt lists each skill's name and description; the
model loads a skill's instructions (`skill.load`) or one of its files (`skill.read`) when it
needs them. Both read the exact version the task started with, checked by its sha256.
Pure data: the workflow offers these tools when its task has skills.
"""

from __future__ import annotations

from dataclasses import dataclass

from workflows.tool_call_types import ToolCallInput
from workflows.tool_catalog import ToolRuns, ToolSpec
from workflows.types import SkillRef

_NAME = {"type": "string", "minLength": 1, "description": "The skill's name, as listed in your instructions"}

SKILL_LOAD = ToolSpec(
    name="skill.load",
    description="Load a skill's instructions (its SKILL.md body) when the task needs them.",
    parameters={
        "type": "object",
        "properties": {"name": _NAME},
        "required": ["name"],
        "additionalProperties": False,
    },
    permission="skills:read",
    writes=False,
    runs=ToolRuns.LOCAL,
    source="skill",
)
SKILL_READ = ToolSpec(
    name="skill.read",
    description="Read one file that a skill ships (a path its instructions name).",
    parameters={
        "type": "object",
        "properties": {"name": _NAME, "path": {"type": "string", "minLength": 1}},
        "required": ["name", "path"],
        "additionalProperties": False,
    },
    permission="skills:read",
    writes=False,
    runs=ToolRuns.LOCAL,
    source="skill",
)
SKILL_TOOLS = (SKILL_LOAD, SKILL_READ)


@dataclass
class SkillLoadInput:
    """Read a skill's body (no path) or one of its files, from the version the task keeps."""

    call: ToolCallInput
    skill: SkillRef
    path: str | None = None
