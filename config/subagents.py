"""`spec.subagents`: how deep and how wide an agent may delegate, and its named profiles.

A profile is a preset for a subagent (`agent.delegate(task, profile="explore")`): a preface
to its instructions and the tools it may use. The tools are patterns (`code.*`) matched
against the parent's own tools, so a profile only ever narrows them; the entry `reading`
stands for every one of them that only reads. Which those are is the tool catalog's to say
(`ToolSpec.reads_only`: it writes nothing and needs only a permission to look), so config,
which does not import the catalog, is told per tool (`allows_tool`). Three profiles ship built
in (`explore`, `plan`, `code`); an agent may override them or add its own here, and a field
an override leaves out keeps the built-in's value. Pydantic only, like all of `config`.
"""

from __future__ import annotations

import fnmatch
import re

from pydantic import Field, field_validator

from config.fields import ProblemPath, Strict

DEFAULT_MAX_DEPTH = 1  # a subagent does not delegate again
MOST_DEPTH = 2  # a subagent's subagent, and no deeper: each level divides the budget again
# Subagents and teammates together: no task starts more than this many levels below the task
# that started the tree. The deepest chain of subagents an agent may ask for, plus one question
# to a teammate; deeper levels would work with a sliver of the budget and keep a person waiting
# on a chain of answers, and agents naming each other in `spec.team` could recurse without end.
TREE_DEPTH = MOST_DEPTH + 1
DEFAULT_MAX_PARALLEL = 4

_PROFILE_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
# In a profile's tools: every tool of the parent that only reads (no tool name lacks a dot).
READING = "reading"


class SubagentProfile(Strict):
    instructions: str | None = Field(default=None, description="Put before the agent's instructions")
    tools: list[str] | None = Field(
        default=None,
        description="Tool names, patterns such as code.*, or reading (every tool that only reads); "
        "only narrows the parent's tools",
    )


BUILT_IN_PROFILES: dict[str, SubagentProfile] = {
    "explore": SubagentProfile(
        instructions=(
            "You explore for another agent: read and search, change nothing, and answer with what "
            "you found and where (thread, issue, file and line)."
        ),
        tools=[READING],
    ),
    "plan": SubagentProfile(
        instructions=(
            "You plan for another agent: read what you need, change nothing, and answer with a plan: "
            "numbered steps, what each touches, the risks and how to check the result."
        ),
        tools=[READING],
    ),
    "code": SubagentProfile(
        instructions=(
            "You make one focused code change for another agent: open the workspace, change as "
            "little as you can, run the tests, and answer with what you changed and what the tests said."
        ),
        tools=[READING, "code.*", "github.create_pull_request"],
    ),
}


class SubagentsSpec(Strict):
    max_depth: int = Field(
        default=DEFAULT_MAX_DEPTH,
        ge=0,
        description="Levels of subagents below a task: 1, a subagent cannot delegate; at most 2",
    )
    max_parallel: int = Field(default=DEFAULT_MAX_PARALLEL, ge=1, le=16)
    profiles: dict[str, SubagentProfile] = {}

    @field_validator("max_depth")
    @classmethod
    def _shallow(cls, depth: int) -> int:
        if depth > MOST_DEPTH:
            raise ValueError(
                f"max_depth {depth} is deeper than subagents may go: set max_depth: {MOST_DEPTH} "
                f"(a subagent may delegate once more) or {DEFAULT_MAX_DEPTH} (the default: it may not)"
            )
        return depth

    def profile(self, name: str) -> SubagentProfile | None:
        """The named profile: the agent's own, its unset fields from the built-in one."""
        built_in, own = BUILT_IN_PROFILES.get(name), self.profiles.get(name)
        if own is None or built_in is None:
            return own or built_in
        return SubagentProfile(
            instructions=own.instructions if own.instructions is not None else built_in.instructions,
            tools=own.tools if own.tools is not None else built_in.tools,
        )

    @property
    def profile_names(self) -> list[str]:
        return sorted({*BUILT_IN_PROFILES, *self.profiles})

    def child(self) -> SubagentsSpec:
        """What a subagent of this agent may still do: one level less."""
        return self.model_copy(update={"max_depth": max(0, self.max_depth - 1)})


def allows_tool(profile: SubagentProfile, tool: str, reads_only: bool) -> bool:
    """Whether the profile lets a subagent use `tool` (`reads_only`: the catalog says it only reads)."""
    if profile.tools is None:
        return True
    return any(
        (pattern == READING and reads_only) or fnmatch.fnmatchcase(tool, pattern) for pattern in profile.tools
    )


def subagent_problems(spec: SubagentsSpec, tools: list[str]) -> list[tuple[ProblemPath, str]]:
    """An agent's own profiles: a valid name, and tools that match some of the agent's (a
    pattern matching none is a typo, or a tool to grant first)."""
    problems: list[tuple[ProblemPath, str]] = []
    for name, profile in spec.profiles.items():
        if not _PROFILE_NAME.match(name):
            problems.append(
                (
                    ("subagents", "profiles", name),
                    f"{name!r} is not a profile name (lowercase, digits, dashes)",
                )
            )
        for index, pattern in enumerate(profile.tools or []):
            if pattern != READING and not any(fnmatch.fnmatchcase(tool, pattern) for tool in tools):
                problems.append(
                    (
                        ("subagents", "profiles", name, "tools", index),
                        f"{pattern!r} matches none of this agent's tools ({', '.join(tools) or 'none'}); "
                        "a profile can only narrow them: grant the tool in spec.tools or remove it here",
                    )
                )
    return problems
