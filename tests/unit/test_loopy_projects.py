"""Loopy projects compile as they are: the two real example projects recorded under
tests/fixtures/seeds/loopy (registry.yml, workflows/<name>/, frontmatter-less skills, Capitalized
agents, sandboxes, bare event field maps, `url` fields), how their registry maps onto OpenLoop
agents, and what is said, with file and line, where a Loopy construct means nothing here. A
folder without steps is an error saying what was found."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from config.playbooks import compile_playbooks
from config.playbooks.compiler import CompileReport
from surfaces.cli.main import app
from workflows.playbook_types import FieldKind

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds" / "loopy"
INCIDENTS = SEEDS / "incidents"
EFFECTIVE = SEEDS / "effective-agents"


def _warnings(report: CompileReport) -> list[str]:
    return [str(w) for w in report.warnings]


def _agents(report: CompileReport) -> dict[str, tuple[str, list[str], str]]:
    return {
        c.name: (c.spec.model_policy.default, list(c.spec.skills), c.spec.model_policy.fallbacks[0])
        for c in report.agent_configs
    }


def test_the_effective_agents_project_compiles_with_its_five_workflows() -> None:
    report = compile_playbooks(EFFECTIVE)

    assert report.ok, [str(e) for e in report.errors]
    shapes = {p.name: [s.name for s in p.steps] for p in report.playbooks}
    assert shapes == {
        "chaining": ["extract", "format", "sort"],
        "evaluator": ["generate", "evaluate"],
        "orchestrator": ["plan", "work", "synthesize"],
        "parallel": ["intake", "performance", "security", "style", "aggregate"],
        "routing": ["classify", "respond"],
    }
    # Capitalized agents become OpenLoop agents; the harness's model is their model policy.
    assert _agents(report)["judge"] == ("anthropic/claude-opus-4-8", ["grading-rubric"], "offline/demo")
    assert _agents(report)["writer"] == ("anthropic/claude-sonnet-4-6", [], "offline/demo")
    evaluate = next(p for p in report.playbooks if p.name == "evaluator").step("evaluate")
    assert (evaluate.agent, evaluate.emits, evaluate.carried) == ("judge", "ContentRequested", ("brief",))
    # Bare field maps are fields; `url` is text.
    assert [(f.name, f.kind) for f in report.events["ChangeSubmitted"].fields] == [
        ("summary", FieldKind.STR),
        ("diff_url", FieldKind.STR),
    ]
    # The frontmatter-less skill is read: name from its folder, description from its heading.
    [skill] = report.skills
    assert (skill.name, skill.description) == ("grading-rubric", "grading-rubric")
    assert "Pass only when 1–3 are fully met" in skill.body


def test_what_means_nothing_here_is_a_warning_with_file_and_line() -> None:
    warnings = _warnings(compile_playbooks(EFFECTIVE))
    registry = str(EFFECTIVE / "registry.yml")

    for line, key in ((33, "provider"), (34, "image"), (35, "network"), (36, "env_file")):
        assert any(w.startswith(f"{registry}:{line}: sandboxes.BaseSandbox.{key}:") for w in warnings), key
    assert any(
        w.startswith(f"{registry}:26: defaults.agent.harness:") and "not inside claude-code" in w
        for w in warnings
    )
    assert any(
        w.startswith(f"{registry}:52: events.TextSubmitted:") and "openloop playbooks fire TextSubmitted" in w
        for w in warnings
    )
    loop = next(w for w in warnings if "evaluate.md:7: emits:" in w)
    assert 'write emits: {event: ContentRequested, when: "verdict == VALUE"}' in loop


def test_the_incidents_project_compiles_its_sensors_and_names_missing_skills() -> None:
    report = compile_playbooks(INCIDENTS)

    assert report.ok, [str(e) for e in report.errors]
    [resolve] = report.playbooks
    assert (resolve.trigger.event, [s.agent for s in resolve.steps]) == (
        "WorkItem",
        ["investigator", "fixer"],
    )
    assert {(s.ref, s.emits) for s in report.sensors} == {
        ("sensors:sentry_issues", "Incident"),
        ("sensors:metric_watch", "MetricThreshold"),
    }
    assert report.events["Incident"].source == "sensor"
    agents = _agents(report)
    assert agents["investigator"][:2] == ("anthropic/claude-sonnet-4-6", ["triage"])
    assert agents["fixer"][:2] == ("anthropic/claude-opus-4-8", ["testing"])
    assert {s.name: s.description for s in report.skills} == {"testing": "testing", "triage": "triage"}
    registry = str(INCIDENTS / "registry.yml")
    missing = [w for w in _warnings(report) if "runs without it" in w]
    assert [w.split(":", 2)[1] for w in missing] == ["22", "24", "25"]
    assert all(w.startswith(registry) for w in missing)
    assert "no skill 'repro-authoring' in skills/ (found: testing, triage)" in missing[0]


FLAT = """\
defaults:
  agent:
    sandbox: Box
    model: claude-sonnet-4-6
    harness: claude-code
sandboxes:
  Box: {provider: local}
agents:
  Writer: {}
  Judge: {model: claude-opus-4-8, skills: [rubric]}
  Scout: {harness: {runtime: codex, model: gpt-5}}
  Local: {harness: {model: ollama/llama3}, sandbox: Nowhere}
events:
  Asked: {text: str, link: url?}
"""
STEP = """\
---
on: Asked
agent: Writer
budget: {wall_clock: 20, spend: {usd: 4}}
output: {draft: str}
---
{{ event.text }}
"""


def _project(tmp_path: Path, registry: str, steps: dict[str, str]) -> Path:
    root = tmp_path / "project"
    for name, text in {"registry.yml": registry, **steps}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_flat_harness_form_codex_models_budgets_and_an_unknown_sandbox(tmp_path: Path) -> None:
    root = _project(
        tmp_path, FLAT, {"workflows/write/draft.md": STEP, "skills/rubric/SKILL.md": "# rubric\n"}
    )
    report = compile_playbooks(root)

    agents = _agents(report)
    assert agents["writer"][0] == "anthropic/claude-sonnet-4-6"
    assert agents["judge"][:2] == ("anthropic/claude-opus-4-8", ["rubric"])
    assert agents["scout"][0] == "openai/gpt-5"
    assert agents["local"][0] == "ollama/llama3"
    assert [str(e) for e in report.errors] == [
        f"{root / 'registry.yml'}:12: agents.Local.sandbox: no sandbox 'Nowhere'; define it under "
        "`sandboxes:` or name one of: Box, default"
    ]
    [step] = compile_playbooks(_project(tmp_path / "ok", FLAT.replace(", sandbox: Nowhere", ""), {
        "workflows/write/draft.md": STEP,
    })).playbooks[0].steps  # fmt: skip
    assert step.budget_usd == 4.0
    wall = [w for w in _warnings(report) if "wall_clock" in w]
    assert wall == [
        f"{root / 'workflows/write/draft.md'}:4: budget.wall_clock: wall_clock 20 is not a per-step "
        "limit here; each step's task is bounded by its agent's spec.limits.wall_clock"
    ]


def test_two_registry_spellings_at_once_are_an_error(tmp_path: Path) -> None:
    root = _project(tmp_path, FLAT, {"workflows/write/draft.md": STEP, "registry.yaml": "events: {}\n"})
    errors = [str(e) for e in compile_playbooks(root).errors]
    assert f"{root / 'registry.yml'}: both registry.yaml and registry.yml are here; keep one" in errors[0]


def test_a_folder_without_steps_is_an_error_saying_what_was_found(tmp_path: Path) -> None:
    root = tmp_path / "loopy"
    shutil.copytree(INCIDENTS, root)
    for step in (root / "workflows" / "resolve").iterdir():
        step.rename(step.with_suffix(".txt"))

    report = compile_playbooks(root)
    result = CliRunner().invoke(app, ["playbooks", "compile", str(root)], env={"COLUMNS": "300"})

    [error] = [str(e) for e in report.errors]
    assert error.startswith(
        f"{root}: no playbook steps found (found: ORIGIN.md, registry.yml, sensors/, skills/, "
    )
    assert "the folders looked in hold no .md step: resolve" in error
    assert (
        f"expected step files at {root}/NAME/STEP.md or, in a Loopy project, {root}/workflows/NAME/STEP.md"
        in error
    )
    assert result.exit_code == 1
    assert "0 playbooks compiled, 1 error(s)" in result.output and "no playbook steps found" in result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no playbook steps found (found: nothing)" in str(compile_playbooks(empty).errors[0])


def test_a_step_file_loose_in_workflows_is_an_error(tmp_path: Path) -> None:
    root = _project(tmp_path, FLAT.replace(", sandbox: Nowhere", ""), {"workflows/draft.md": STEP})
    errors = [str(e) for e in compile_playbooks(root).errors]
    assert errors == [
        f"{root / 'workflows/draft.md'}:1: a step belongs in a playbook's folder: move it to "
        f"{root / 'workflows/NAME/draft.md'}"
    ]


def test_the_compile_command_takes_the_project_folder_as_an_argument() -> None:
    result = CliRunner().invoke(app, ["playbooks", "compile", str(EFFECTIVE)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "5 playbooks compiled, 0 error(s)" in result.output
    assert "evaluator  on ContentRequested (playbook)" in result.output


def test_a_skill_with_frontmatter_still_goes_through_the_skills_store(tmp_path: Path) -> None:
    skill = textwrap.dedent("""\
        ---
        name: rubric
        description: Grade drafts
        ---
        Grade it.
        """)
    root = _project(tmp_path, FLAT.replace(", sandbox: Nowhere", ""), {
        "workflows/write/draft.md": STEP, "skills/rubric/SKILL.md": skill,
    })  # fmt: skip
    [found] = compile_playbooks(root).skills
    assert (found.name, found.description, found.body) == ("rubric", "Grade drafts", "Grade it.")


def test_a_registry_alone_is_the_one_empty_project_and_only_warns(tmp_path: Path) -> None:
    root = _project(tmp_path, "events: {Asked: {text: str}}\n", {})
    report = compile_playbooks(root)
    assert report.ok
    assert (
        f"{root}: registry: no playbooks here, only the registry: applying this folder retires every "
        "applied playbook" in _warnings(report)
    )
