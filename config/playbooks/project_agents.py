"""Agents a project's registry defines itself, Loopy-style, instead of naming applied ones.

    defaults:
      agent: {sandbox: default, harness: {runtime: claude-code, model: claude-sonnet-4-6}}
    sandboxes:
      default: {provider: daytona, network: [github.com], env_file: secrets/dev.env, repos: [acme/x]}
    agents:
      Investigator: {skills: [triage]}                     # inherits the default harness
      Fixer: {harness: {model: claude-opus-4-8}, skills: [testing]}
      Scout: {harness: {runtime: codex, model: gpt-5}}

Each Capitalized agent becomes an OpenLoop agent named in kebab case (`Investigator` →
`investigator`): its harness's model is its model policy (`anthropic/...` for Claude Code,
`openai/...` for Codex, a name with a `/` as written), with the offline model as the fallback a
worker without that provider's key uses; its skills are the project's `skills/` folders. The
older flat form (`model:` and `harness: claude-code` side by side) reads the same. What has no
meaning here (the harness program itself, a sandbox's provider, image, egress, env file and
clones) is a warning at its line, once per thing; a sandbox an agent names that is not defined
is an error, as in Loopy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from config.playbooks.yaml_text import YamlDoc
from config.problems import ConfigProblem, Loc

__all__ = ["OFFLINE_FALLBACK", "ProjectAgent", "ProjectAgents", "agent_name", "read_project_agents"]

OFFLINE_FALLBACK = "offline/demo"
PROJECT_AGENT = re.compile(r"^[A-Z][A-Za-z0-9_]*$")
AGENT_KEYS = ("harness", "model", "skills", "sandbox", "description")
SANDBOX_KEYS = ("provider", "image", "network", "env_file", "repos")
# The harness runtime -> the LiteLLM provider its models are called through.
RUNTIMES = {"claude-code": "anthropic", "codex": "openai"}
_OPENAI = re.compile(r"^(gpt-|codex-|o\d)")  # OpenAI's model families, as Codex names them
BUILT_IN_SANDBOX = "default"
_WHY_SANDBOX = {
    "provider": "steps run as agent tasks on OpenLoop's workers, not in a {value} sandbox",
    "image": "no image is built: steps call the model and OpenLoop's tools, no shell",
    "network": "no egress allowlist applies: a step makes no network calls of its own",
    "env_file": "not read: model keys come from the worker's environment (e.g. ANTHROPIC_API_KEY)",
    "repos": "nothing is cloned: grant the agent GitHub tools and repositories instead",
}


@dataclass(frozen=True)
class ProjectAgent:
    written: str  # as the registry writes it: Investigator
    name: str  # the OpenLoop agent it becomes: investigator
    model: str  # a LiteLLM model string
    skills: tuple[str, ...] = ()
    line: int | None = None


@dataclass
class ProjectAgents:
    agents: dict[str, ProjectAgent] = field(default_factory=dict)  # by the written name
    problems: list[ConfigProblem] = field(default_factory=list)
    warnings: list[ConfigProblem] = field(default_factory=list)


def agent_name(written: str) -> str:
    """`Investigator` → `investigator`, `CodeReviewer` → `code-reviewer`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", written).replace("_", "-").lower()[:63]


def is_project_agent(name: object, value: object) -> bool:
    return isinstance(name, str) and isinstance(value, dict) and PROJECT_AGENT.match(name) is not None


def _harness(doc: YamlDoc, loc: Loc, entry: dict[str, Any], out: ProjectAgents) -> dict[str, str]:
    """{runtime, model} as this entry writes them, in either form."""
    found: dict[str, str] = {}
    harness = entry.get("harness")
    if isinstance(harness, str):
        found["runtime"] = harness
    elif isinstance(harness, dict):
        for key in ("runtime", "model"):
            if isinstance(harness.get(key), str):
                found[key] = harness[key]
        for key in harness:
            if key not in ("runtime", "model"):
                out.warnings.append(doc.problem((*loc, "harness", str(key)), "not used here; it is ignored"))
    elif harness is not None:
        out.problems.append(doc.problem((*loc, "harness"), "write {runtime: claude-code, model: NAME}"))
    if isinstance(entry.get("model"), str):
        found["model"] = entry["model"]
    return found


def _model(runtime: str, model: str) -> str:
    """The LiteLLM name: by the runtime, or (OpenCode drives both) by the model's family."""
    if "/" in model:
        return model
    family = "anthropic" if model.startswith("claude-") else "openai" if _OPENAI.match(model) else None
    provider = RUNTIMES.get(runtime, family)
    return f"{provider}/{model}" if provider else model


def _skills(doc: YamlDoc, loc: Loc, entry: dict[str, Any], out: ProjectAgents) -> tuple[str, ...]:
    skills = entry.get("skills") or []
    if not isinstance(skills, list) or not all(isinstance(s, str) and s for s in skills):
        out.problems.append(doc.problem((*loc, "skills"), "list skill folders, e.g. [triage, rubrics/fix]"))
        return ()
    return tuple(skills)


def _sandboxes(doc: YamlDoc, out: ProjectAgents) -> set[str]:
    sandboxes = doc.data.get("sandboxes") or {}
    if not isinstance(sandboxes, dict):
        out.problems.append(doc.problem(("sandboxes",), "expected a mapping of sandbox names to settings"))
        return set()
    for name, entry in sandboxes.items():
        loc: Loc = ("sandboxes", str(name))
        if not isinstance(entry, dict):
            out.problems.append(doc.problem(loc, "expected a mapping such as {provider: docker}"))
            continue
        for key, value in entry.items():
            why = _WHY_SANDBOX.get(str(key), "not a sandbox setting OpenLoop knows; it is ignored")
            message = f"sandbox {name}: {key} — " + why.format(value=value)
            out.warnings.append(doc.problem((*loc, str(key)), message))
    return {str(name) for name in sandboxes}


def _sandbox_named(
    doc: YamlDoc, loc: Loc, entry: dict[str, Any], defined: set[str], out: ProjectAgents
) -> None:
    name = entry.get("sandbox")
    if name is None or name == BUILT_IN_SANDBOX or name in defined:
        return
    known = ", ".join(sorted(defined | {BUILT_IN_SANDBOX}))
    message = f"no sandbox {name!r}; define it under `sandboxes:` or name one of: {known}"
    out.problems.append(doc.problem((*loc, "sandbox"), message))


def read_project_agents(doc: YamlDoc) -> ProjectAgents:
    """The registry's own agents, with `defaults.agent` (a mapping) folded into each."""
    out = ProjectAgents()
    defined = _sandboxes(doc, out)
    defaults_block = doc.data.get("defaults")
    base = defaults_block.get("agent") if isinstance(defaults_block, dict) else None
    base_loc: Loc = ("defaults", "agent")
    inherited: dict[str, str] = {}
    base_skills: tuple[str, ...] = ()
    if isinstance(base, dict):
        _sandbox_named(doc, base_loc, base, defined, out)
        inherited = _harness(doc, base_loc, base, out)
        base_skills = _skills(doc, base_loc, base, out)
    agents = doc.data.get("agents")
    runtimes_told: set[str] = set()
    for written, entry in agents.items() if isinstance(agents, dict) else []:
        if not is_project_agent(written, entry):
            continue
        loc: Loc = ("agents", written)
        for key in entry:
            if key not in AGENT_KEYS:
                message = f"{written}: {key!r} is not used here; an agent takes {', '.join(AGENT_KEYS)}"
                out.warnings.append(doc.problem((*loc, str(key)), message))
        _sandbox_named(doc, loc, entry, defined, out)
        harness = {**inherited, **_harness(doc, loc, entry, out)}
        runtime = harness.get("runtime", "claude-code")
        if "model" not in harness:
            message = f"{written} names no model; add harness: {{model: NAME}} here or in defaults.agent"
            out.problems.append(doc.problem(loc, message))
            continue
        model = _model(runtime, harness["model"])
        if runtime not in runtimes_told:
            runtimes_told.add(runtime)
            at = (*loc, "harness") if "harness" in entry else (*base_loc, "harness")
            message = (
                f"harness runtime {runtime!r}: steps run as OpenLoop agent tasks, not inside {runtime}: "
                f"{written} calls {model} through LiteLLM with OpenLoop's tools; a worker without that "
                f"provider's key answers with {OFFLINE_FALLBACK}"
            )
            out.warnings.append(doc.problem(at, message))
        skills = tuple(dict.fromkeys((*base_skills, *_skills(doc, loc, entry, out))))
        line = doc.line(loc)
        out.agents[written] = ProjectAgent(written, agent_name(written), model, skills, line)
    return out
