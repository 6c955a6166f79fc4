"""The arguments of the tools the workflow runs itself (`workflows/tools/`), as pydantic
models. Apart from their handlers so the sandbox can pass them through: built once per
worker process, not once per workflow run (building them was a tenth of a worker's CPU per
agent step). Pure data.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from workflows.tool_args import NonEmpty, ToolArgs

# agent.delegate, agent.ask_teammate ----------------------------------------------------------


class DelegateArgs(ToolArgs):
    task: NonEmpty = Field(description="The work, self-contained")
    profile: NonEmpty | None = Field(
        None,
        description=(
            "A preset: explore (reads and searches, changes nothing), plan (the same, "
            "answers with a plan), code (the coding tools), or one your config defines"
        ),
    )
    tools: list[NonEmpty] | None = Field(
        None, description="Which of your tools it may use (default: the profile's, else all yours)"
    )


class AskTeammateArgs(ToolArgs):
    teammate: NonEmpty = Field(description="The teammate agent's name")
    question: NonEmpty = Field(description="Everything it needs to answer")


# skill.load, skill.read ----------------------------------------------------------------------

SkillName = Annotated[
    str, Field(min_length=1, description="The skill's name, as listed in your instructions")
]


class LoadArgs(ToolArgs):
    name: SkillName


class ReadArgs(ToolArgs):
    name: SkillName
    path: NonEmpty


# code.open_workspace, github.create_pull_request ---------------------------------------------


class OpenWorkspaceArgs(ToolArgs):
    repo: Annotated[str, Field(min_length=3)] = Field(description="owner/name of the repository")
    base: NonEmpty | None = Field(None, description="Branch to start from (default: main)")


class PullRequestArgs(ToolArgs):
    title: Annotated[str, Field(min_length=1, max_length=200)] = Field(description="The PR's title")
    body: str | None = Field(None, description="What changed and why, for reviewers")
