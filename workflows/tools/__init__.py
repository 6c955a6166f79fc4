"""The tools the workflow runs itself, one module per family: `agents` (a subagent, a
teammate), `skills` (reading the task's skills) and `workspace` (a coding workspace and its
draft pull request). Each module declares its tools (`workflows.workflow_tool`); importing
this package imports every family, so the catalog, the dispatch and the depth rules all
read the same declarations. A new tool is one declaration in its family; a new family is a
module here and its name below.

Workflow code (sandboxed): deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.tool_catalog import ToolSpec

from workflows.tools import agents, skills, workspace
from workflows.workflow_tool import WorkflowTool, declared

FAMILIES = (agents, skills, workspace)
WORKFLOW_TOOLS: dict[str, WorkflowTool] = declared()


def starts_task(name: str) -> bool:
    """Whether the named tool starts a child task (a subagent, a teammate's task)."""
    tool = WORKFLOW_TOOLS.get(name)
    return tool is not None and tool.starts_task


def with_skills(name: str) -> bool:
    """Whether the named tool reads the task's skills (and so comes and stays with them)."""
    tool = WORKFLOW_TOOLS.get(name)
    return tool is not None and tool.with_skills


def skill_specs() -> list[ToolSpec]:
    """The specs a task with skills is offered besides the ones it started with."""
    return [tool.spec for tool in WORKFLOW_TOOLS.values() if tool.with_skills]
