"""The skill activity: a skill's instructions or one of its files, from the pinned version.

The task names the version it started with and its sha256; a row that no longer matches is
an error a retry cannot fix. A text file is returned as text; a binary one (a font, a PDF,
an archive) as one line naming it, its size and media type, never as bytes. Output is
bounded and audited like any tool's.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.runtime import runtime
from activities.store import skills
from activities.store.tool_calls import bound_and_audit
from activities.tool_errors import ToolErrorKind
from config.skill_files import describe, is_text
from workflows.errors import ErrorType
from workflows.skill_tools import SkillLoadInput
from workflows.types import ActivityName, ToolCallResult


@activity.defn(name=ActivityName.SKILL_LOAD)
async def load_skill(inp: SkillLoadInput) -> ToolCallResult:
    pool = await runtime().pool()
    stored = await skills.pinned_skill(pool, inp.skill)
    if stored is None or stored.sha256 != inp.skill.sha256:
        raise ApplicationError(
            f"skill {inp.skill.name} v{inp.skill.version} is gone or changed since the task started",
            type=ErrorType.TOOL_CONFIG_ERROR,
            non_retryable=True,
        )
    data = None if inp.path is None else await skills.skill_file(pool, stored.name, stored.version, inp.path)
    if inp.path is None:
        result = ToolCallResult(ok=True, output=f"# Skill: {stored.name}\n\n{stored.body}")
    elif data is not None:
        output = data.decode("utf-8") if is_text(data) else describe(inp.path, data)
        result = ToolCallResult(ok=True, output=output)
    else:
        names = await skills.skill_files(pool, stored.name, stored.version)
        files = ", ".join(names) or "none"
        kind = ToolErrorKind.NOT_FOUND
        result = ToolCallResult(
            ok=False,
            output=f"Error ({kind}): {stored.name} has no file {inp.path!r}; files: {files}",
            error_kind=kind.value,
        )
    async with pool.connection() as conn:
        return await bound_and_audit(conn, inp.call, result)
