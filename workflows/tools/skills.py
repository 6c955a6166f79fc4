"""`skill.load` and `skill.read`: the model reads a skill's instructions or one of its files
when it needs them (progressive disclosure: the system prompt lists each skill's name and
description). Both read the exact version the task started with, checked by its sha256, in
a local activity. They come with a task's skills rather than a grant, and stay when a
loaded skill's `allowed-tools` narrows what the task is offered.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.activity_options import LOCAL_TOOL_OPTIONS
    from workflows.skill_tools import SkillLoadInput
    from workflows.types import ActivityName, ToolCallResult
    from workflows.workflow_tool_args import LoadArgs, ReadArgs

from workflows.workflow_tool import WorkflowCall, declared, workflow_tool


@workflow_tool(
    "skill.load",
    LoadArgs,
    "Load a skill's instructions (its SKILL.md body) when the task needs them.",
    permission="skills:read",
    writes=False,
    with_skills=True,
)
async def load(args: LoadArgs, call: WorkflowCall) -> ToolCallResult:
    return await _read(call, args.name, None)


@workflow_tool(
    "skill.read",
    ReadArgs,
    "Read one file that a skill ships (a path its instructions name).",
    permission="skills:read",
    writes=False,
    with_skills=True,
)
async def read(args: ReadArgs, call: WorkflowCall) -> ToolCallResult:
    return await _read(call, args.name, args.path)


async def _read(call: WorkflowCall, name: str, path: str | None) -> ToolCallResult:
    """A skill's body (no path) or one of its files, from the version the task keeps."""
    task = call.task
    skill = next((ref for ref in task.inp.skills if ref.name == name), None)
    if skill is None:
        known = ", ".join(ref.name for ref in task.inp.skills)
        problem = f"Error (not_found): no skill {name!r}; skills: {known}"
        return ToolCallResult(ok=False, output=problem, error_kind="not_found")
    result: ToolCallResult = await workflow.execute_local_activity(
        ActivityName.SKILL_LOAD,
        SkillLoadInput(call.input, skill, path),
        result_type=ToolCallResult,
        **LOCAL_TOOL_OPTIONS,
    )
    if result.ok and path is None and skill.allowed_tools:
        # For the rest of the task (and its later runs and subagents, which start with
        # these specs) the model is offered only the tools the skill allows that it had.
        keep = [tool for tool, declared_tool in declared().items() if declared_tool.with_skills]
        removed = task.tools.narrow(skill.allowed_tools, keep=keep)
        if removed:
            task.record.decide(
                f"skill {name} allows only {', '.join(skill.allowed_tools)}: "
                f"no longer offered {', '.join(removed)}"
            )
    return result
