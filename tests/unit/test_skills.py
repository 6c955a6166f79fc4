"""SKILL.md folders: what loads, and every way a broken skill fails loudly with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.problems import AgentConfigError
from config.skills import DEFAULT_DIR, find_skills, load_skill, load_skills

GOOD = """---
name: triage
description: "When: a CI run failed. What: find the failing test"
allowed-tools: [github.get_job_log]
---
Read the log, then say what failed.
"""


def write(root: Path, folder: str, text: str, **files: str) -> Path:
    where = root / folder
    where.mkdir(parents=True)
    (where / "SKILL.md").write_text(text)
    for name, content in files.items():
        (where / name).write_text(content)
    return where


def problems(root: Path, ref: str) -> list[str]:
    with pytest.raises(AgentConfigError) as info:
        load_skills(root, [ref])
    return [str(problem) for problem in info.value.problems]


def test_a_skill_loads_with_its_resources_and_a_stable_digest(tmp_path: Path) -> None:
    write(tmp_path / "rubrics", "triage", GOOD, **{"steps.md": "1. read"})
    (skill,) = load_skills(tmp_path, ["rubrics/triage"])
    assert (skill.ref, skill.name, skill.allowed_tools) == (
        "rubrics/triage",
        "triage",
        ("github.get_job_log",),
    )
    assert skill.body == "Read the log, then say what failed." and skill.resources == {"steps.md": b"1. read"}
    again = load_skill(tmp_path / "rubrics" / "triage", tmp_path)
    assert again.sha256 == skill.sha256
    (tmp_path / "rubrics" / "triage" / "steps.md").write_text("1. read twice")
    assert load_skill(tmp_path / "rubrics" / "triage", tmp_path).sha256 != skill.sha256


def test_the_shipped_skills_are_valid() -> None:
    refs = find_skills(DEFAULT_DIR)
    assert {"thread-summary", "ci-triage"} <= set(refs)
    assert all(skill.description for skill in load_skills(DEFAULT_DIR, refs))


def test_an_unquoted_colon_in_the_description_names_its_line_and_the_fix(tmp_path: Path) -> None:
    write(
        tmp_path,
        "triage",
        GOOD.replace('"When: a CI run failed. What: find the failing test"', "Use: when CI fails: always"),
    )
    [problem] = problems(tmp_path, "triage")
    assert "SKILL.md:3:" in problem and "not valid YAML" in problem and "quote a value" in problem


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (("name: triage", "name: triage-two"), "differs from its folder 'triage'"),
        (("name: triage", "name: ''"), "a skill needs a name, its folder's: name: triage"),
        (
            ('description: "When: a CI run failed. What: find the failing test"', "description: ''"),
            "needs a description",
        ),
        (("allowed-tools: [github.get_job_log]", "allowed-tools: 5"), "a list of tool names"),
        (("---\nname", "name"), "no YAML frontmatter"),
    ],
)
def test_broken_frontmatter_fails_with_file_line_and_field(
    tmp_path: Path, change: tuple[str, str], fragment: str
) -> None:
    write(tmp_path, "triage", GOOD.replace(*change, 1))
    assert any(fragment in problem and "SKILL.md" in problem for problem in problems(tmp_path, "triage"))


def test_a_missing_skill_and_a_resource_leaving_the_folder_are_errors(tmp_path: Path) -> None:
    assert any("no skill 'absent'" in problem for problem in problems(tmp_path, "absent"))
    assert any("no skill '../etc'" in problem for problem in problems(tmp_path, "../etc"))
    where = write(tmp_path, "triage", GOOD)
    outside = tmp_path / "secret.txt"
    outside.write_text("token")
    (where / "link.txt").symlink_to(outside)
    assert any("leaving the skill folder" in problem for problem in problems(tmp_path, "triage"))
