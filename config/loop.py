"""Load loop YAML files (`kind: Loop`) into `workflows.loop_types.LoopSpec`.

A loop file says what to repair (mission), where (a local checkout or a GitHub repository),
the shell lines of each step, an optional baseline metric, the limits and the sandbox. Like
agent files, every problem names the file, line and field path and what to write instead,
and the only error raised for bad input is `AgentConfigError`. The models here mirror the
file as written (`10m`, `2Gi`); `LoopSpec` holds plain seconds and megabytes.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, Field, ValidationError, field_validator, model_validator

from config.agent import _NAME as NAME_RULE  # loops are named like agents
from config.coding import SandboxFields
from config.extra_repos import GITHUB_REPO
from config.fields import Strict, rule_error
from config.loop_fields import Command, Megabytes, MetricRegex, Seconds, command_line
from config.problems import AgentConfigError, ConfigProblem, Loc, _inner_model, expand_error, field_path
from config.yaml_nodes import duplicate_keys, line_of, read_text_file, yaml_documents
from workflows.loop_types import Baseline, Limits, LoopSpec, Mission, RepoSource, Sandbox, Step

__all__ = ["STARTER_LOOP", "load_loop_file", "parse_loop", "starter_loop_text"]

STARTER_LOOP = Path(__file__).parent / "loops" / "starter.yaml"


class LoopMetadata(Strict):
    name: str = Field(description="Loop name: lowercase letters, digits and dashes")
    description: str = ""

    @field_validator("name")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not NAME_RULE.match(value):
            raise ValueError(
                f"{value!r} must be 1-63 lowercase letters, digits or dashes, "
                "starting and ending with a letter or digit"
            )
        return value


class MissionFields(Strict):
    objective: str = Field(min_length=1)
    non_goals: list[str] = Field(default_factory=list)
    definition_of_done: str = ""


class RepoFields(Strict):
    path: str | None = None
    github: str | None = None
    base: str = Field(default="main", min_length=1)
    agent: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> RepoFields:
        if (self.path is None) == (self.github is None):
            one = "give exactly one of `path: ./checkout` (a local git checkout) or `github: owner/name`"
            raise rule_error([((), one)])
        if self.github is not None and not GITHUB_REPO.match(self.github):
            raise rule_error([(("github",), f"{self.github!r} is not a repository; write owner/name")])
        if self.agent is not None and self.github is None:
            raise rule_error([(("agent",), "`agent` says whose GitHub access clones `github`; remove it")])
        if self.agent is not None and not NAME_RULE.match(self.agent):
            raise rule_error([(("agent",), f"{self.agent!r} is not an agent name")])
        return self


class FixerAgent(Strict):
    """`fix: {agent: NAME}`: an agent with coding tools fixes each round in the workspace."""

    agent: str

    @field_validator("agent")
    @classmethod
    def _agent_name(cls, value: str) -> str:
        if not NAME_RULE.match(value):
            raise ValueError(f"{value!r} is not an agent name (lowercase letters, digits and dashes)")
        return value


def _shell_line_or_agent(value: Any) -> Any:
    """A shell line, or `{agent: NAME}`; one message either way, not one per alternative."""
    if isinstance(value, dict):
        if set(value) != {"agent"}:
            raise ValueError(
                "write fix as a shell command line, or as `{agent: NAME}` to let an agent fix it"
            )
        return FixerAgent(agent=value["agent"])
    if isinstance(value, list):
        raise ValueError("expected a shell command line or `{agent: NAME}` (got a list)")
    return command_line(value) if isinstance(value, str) else value


class CommandFields(Strict):
    play: Command | None = None
    scan: Command | None = None
    fix: Annotated[FixerAgent | str | None, BeforeValidator(_shell_line_or_agent)] = None
    verify: Command
    improve: Command | None = None


class BaselineFields(Strict):
    command: Command
    metric_name: str = Field(min_length=1)
    regex: MetricRegex
    value: float
    direction: Literal["greater_equal", "less_equal"] = "greater_equal"


class LimitFields(Strict):
    total_rounds: int = Field(default=10, ge=1)
    command_timeout: Seconds = 600.0
    stall_timeout: Seconds = 120.0
    max_consecutive_failures: int = Field(default=3, ge=1)
    no_progress_rounds: int = Field(default=3, ge=1)
    memory: Megabytes = 2048.0
    max_processes: int = Field(default=256, ge=1)
    max_file_size: Megabytes = 512.0
    output: Megabytes = 4.0
    max_duration: Seconds | None = None  # the whole loop's wall clock
    budget: float | None = Field(default=None, gt=0)  # US dollars an agent fixer may spend in all


class LoopSpecFields(Strict):
    mission: MissionFields
    repo: RepoFields
    commands: CommandFields
    baseline: BaselineFields | None = None
    limits: LimitFields = LimitFields()
    sandbox: SandboxFields = SandboxFields()


class LoopFile(Strict):
    apiVersion: Literal["openloop.ai/v1alpha1"]  # noqa: N815 - the YAML key
    kind: Literal["Loop"]
    metadata: LoopMetadata
    spec: LoopSpecFields


def _model_at(loc: Loc) -> type[BaseModel] | None:
    model: type[BaseModel] | None = LoopFile
    for part in loc:
        if isinstance(part, int) or model is None:
            continue  # a list index: the items share one model
        field = model.model_fields.get(part)
        model = _inner_model(field.annotation) if field is not None else None
    return model


def _worded(error: dict[str, Any]) -> list[tuple[Loc, str]]:
    """One pydantic error as (location, message); unknown and missing keys are read against
    the loop file's models (`expand_error` knows the agent file's)."""
    loc: Loc = tuple(part for part in error["loc"] if not str(part).startswith("function-"))
    model = _model_at(loc[:-1]) if loc else None
    if error["type"] == "extra_forbidden" and model is not None:
        allowed = list(model.model_fields)
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return [(loc, f"unknown key {str(loc[-1])!r}; {hint}allowed keys here: {', '.join(allowed)}")]
    if error["type"] == "missing" and model is not None:
        example = {"apiVersion": "openloop.ai/v1alpha1", "kind": "Loop", "verify": "python -m pytest -q"}
        add = f"`{loc[-1]}: {example[str(loc[-1])]}`" if str(loc[-1]) in example else "it"
        return [(loc, f"required field is missing; add {add}")]
    return expand_error(error)


def _sandbox(fields: SandboxFields, base_dir: Path) -> Sandbox:
    """The sandbox with its file paths made absolute, read from the loop file's folder like
    `repo.path`: the worker that reads them knows nothing of that folder."""

    def absolute(path: str) -> str:
        return str((base_dir / Path(path).expanduser()).resolve())

    data = fields.model_dump()
    if fields.env_file is not None:
        data["env_file"] = absolute(fields.env_file)
    data["repos"] = [
        {**repo, "path": absolute(repo["path"])} if repo["path"] else repo for repo in data["repos"]
    ]
    return Sandbox(**data)


def _spec(fields: LoopFile, source: str, repo_path: str | None, base_dir: str | Path = ".") -> LoopSpec:
    spec = fields.spec
    fixer = spec.commands.fix.agent if isinstance(spec.commands.fix, FixerAgent) else None
    lines = spec.commands.model_dump(exclude={"fix"}) | {
        "fix": f"agent {fixer}" if fixer else spec.commands.fix
    }
    commands = {Step(name): line for name, line in lines.items() if line is not None}
    baseline = None
    if spec.baseline is not None:
        baseline = Baseline(**spec.baseline.model_dump())
        commands[Step.BASELINE] = spec.baseline.command
    limits = spec.limits
    return LoopSpec(
        name=fields.metadata.name,
        mission=Mission(**spec.mission.model_dump()),
        repo=RepoSource(**{**spec.repo.model_dump(), "path": repo_path}),
        commands=commands,
        baseline=baseline,
        limits=Limits(
            total_rounds=limits.total_rounds,
            command_timeout_s=limits.command_timeout,
            stall_timeout_s=limits.stall_timeout,
            max_consecutive_failures=limits.max_consecutive_failures,
            no_progress_rounds=limits.no_progress_rounds,
            memory_mb=max(1, round(limits.memory)),
            max_processes=limits.max_processes,
            max_file_mb=max(1, round(limits.max_file_size)),
            output_kb=max(1, round(limits.output * 1024)),
            max_duration_s=limits.max_duration,
            budget_usd=limits.budget,
        ),
        sandbox=_sandbox(spec.sandbox, Path(base_dir)),
        source=source,
        fixer_agent=fixer,
    )


def _validated(node: yaml.Node, data: Any, source: str) -> LoopFile:
    if not isinstance(data, dict):
        message = (
            "not a loop document: expected a mapping with apiVersion, kind, metadata, spec "
            f"(got {type(data).__name__})"
        )
        raise AgentConfigError([ConfigProblem(source, node.start_mark.line + 1, "", message)])
    found: list[tuple[Loc, int | None, str]] = list(duplicate_keys(node))
    fields: LoopFile | None = None
    try:
        fields = LoopFile.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            found += [(loc, line_of(node, loc), message) for loc, message in _worded(dict(error))]
    if found or fields is None:
        problems = [ConfigProblem(source, line, field_path(loc), message) for loc, line, message in found]
        raise AgentConfigError(sorted(dict.fromkeys(problems), key=lambda p: (p.line or 0, p.field)))
    return fields


def parse_loop(
    text: str, source: str = "<string>", base_dir: str | Path = ".", *, check_paths: bool = False
) -> LoopSpec:
    """The loop in `text`; a relative `repo.path` is read from `base_dir` (the file's folder).

    With `check_paths`, a local repository that is not a directory here is a problem too.
    """
    documents = yaml_documents(text, source)
    if len(documents) != 1:
        found = "the file is empty" if not documents else f"found {len(documents)} documents"
        raise AgentConfigError([ConfigProblem(source, None, "", f"expected one loop document; {found}")])
    node, data = documents[0]
    fields = _validated(node, data, source)
    repo_path = None
    if fields.spec.repo.path is not None:
        repo_path = str((Path(base_dir) / Path(fields.spec.repo.path).expanduser()).resolve())
        if check_paths and not Path(repo_path).is_dir():
            loc = ("spec", "repo", "path")
            message = f"no directory at {repo_path} (a relative path is read from the loop file's folder)"
            raise AgentConfigError([ConfigProblem(source, line_of(node, loc), field_path(loc), message)])
    return _spec(fields, source, repo_path, base_dir)


def load_loop_file(path: str | Path) -> LoopSpec:
    """The loop in a YAML file; its local repository must exist."""
    path = Path(path)
    return parse_loop(read_text_file(path), str(path), path.resolve().parent, check_paths=True)


def starter_loop_text() -> str:
    """The starter loop file `openloop loops init` writes next to its demo project."""
    return STARTER_LOOP.read_text(encoding="utf-8")
