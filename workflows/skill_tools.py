"""The input of the activity that reads an agent's skills for `skill.load` and `skill.read`
(declared in `workflows.tools.skills`). Pure data."""

from __future__ import annotations

from dataclasses import dataclass

from workflows.tool_call_types import ToolCallInput
from workflows.types import SkillRef


@dataclass
class SkillLoadInput:
    """Read a skill's body (no path) or one of its files, from the version the task keeps."""

    call: ToolCallInput
    skill: SkillRef
    path: str | None = None
