"""The specs of the two coding tools the workflow runs itself: `code.open_workspace` (a
sandboxed clone of a bound repository, held by a loop worker, for the `code.*` tools) and
`github.create_pull_request` (the workspace's diff as a draft pull request, always after a
person's approval of that exact diff). Declared once, pure data; `workflows.task_workspace`
runs them."""

from __future__ import annotations

from workflows.code_types import CREATE_PULL_REQUEST
from workflows.tool_catalog import ToolRuns, ToolSpec, WriteBound

WORKSPACE_SOURCE = "workspace"
PULL_REQUEST_SOURCE = "pull_request"

OPEN_WORKSPACE = ToolSpec(
    name="code.open_workspace",
    description=(
        "Clone one of your repositories into a sandboxed workspace so you can read, edit and "
        "test its code with the code.* tools. Runs the project's tests once to show where it stands."
    ),
    parameters={
        "type": "object",
        "properties": {
            "repo": {"type": "string", "minLength": 3, "description": "owner/name of the repository"},
            "base": {"type": "string", "minLength": 1, "description": "Branch to start from (default: main)"},
        },
        "required": ["repo"],
        "additionalProperties": False,
    },
    permission="code:read",
    writes=False,
    runs=ToolRuns.WORKSPACE,
    bound_argument="repo",
    bound_by=WriteBound.GITHUB_REPOS,
    source=WORKSPACE_SOURCE,
)

CREATE_PULL_REQUEST_SPEC = ToolSpec(
    name=CREATE_PULL_REQUEST,
    description=(
        "Propose the workspace's changes as a draft pull request. A person approves the exact "
        "diff first (they see the diff, the tests before and after, and the cost); then a branch, "
        "a commit and the draft pull request are made. Run the tests before you propose."
    ),
    parameters={
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 200, "description": "The PR's title"},
            "body": {"type": "string", "description": "What changed and why, for reviewers"},
        },
        "required": ["title"],
        "additionalProperties": False,
    },
    permission="pulls:write",
    writes=True,
    runs=ToolRuns.REMOTE,
    source=PULL_REQUEST_SOURCE,
    always_gated=True,
)
