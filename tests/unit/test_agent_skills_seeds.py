"""Skills published for the Agent Skills format load as they are: binary resources
byte-exact, spec limits the ecosystem stretches as warnings, a SKILL.md without frontmatter
told exactly what to add, and size limits that name the skill, the file and the fix.
`openloop skills validate` prints them like the other validators."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from config.problems import AgentConfigError
from config.skill_files import SkillLimits, describe, is_text, media_type
from config.skills import load_skill
from surfaces.cli.skills import skills_app

SEEDS = Path(__file__).parents[1] / "fixtures" / "seeds" / "agent-skills"
BINARIES = [
    ("canvas-design", "canvas-fonts/EricaOne-Regular.ttf", "font/ttf"),
    ("canvas-design", "canvas-fonts/Silkscreen-Regular.ttf", "font/ttf"),
    ("theme-factory", "theme-showcase.pdf", "application/pdf"),
    ("web-artifacts-builder", "scripts/shadcn-components.tar.gz", "application/gzip"),
]


def problems_of(folder: Path, limits: SkillLimits | None = None) -> list[str]:
    with pytest.raises(AgentConfigError) as info:
        load_skill(folder, limits=limits)
    return [str(problem) for problem in info.value.problems]


@pytest.mark.parametrize(("skill", "path", "kind"), BINARIES)
def test_binary_resources_load_byte_exact_and_are_described_not_shown(
    skill: str, path: str, kind: str
) -> None:
    loaded = load_skill(SEEDS / skill)
    on_disk = (SEEDS / skill / path).read_bytes()
    assert loaded.resources[path] == on_disk and b"\x00" in on_disk
    assert not is_text(on_disk) and media_type(path, on_disk) == kind
    assert describe(path, on_disk).startswith(f"{path} is a binary file (") and kind in describe(
        path, on_disk
    )


def test_text_resources_stay_readable_and_a_binary_without_nul_bytes_is_still_binary(tmp_path: Path) -> None:
    theme = (SEEDS / "theme-factory" / "themes" / "arctic-frost.md").read_bytes()
    assert is_text(theme)
    folder = tmp_path / "theme-factory"
    shutil.copytree(SEEDS / "theme-factory", folder)
    latin1 = "Café crème, façade".encode("latin-1")  # not UTF-8, and no NUL byte
    (folder / "notes.txt").write_bytes(latin1)
    loaded = load_skill(folder)
    assert loaded.resources["notes.txt"] == latin1 and not is_text(latin1)
    assert loaded.resources["themes/arctic-frost.md"] == theme


def test_a_description_over_the_spec_limit_is_a_warning_with_its_line() -> None:
    skill = load_skill(SEEDS / "claude-api")  # Anthropic's own: 1,068 characters
    assert len(skill.description) > 1024
    [warning] = [str(w) for w in skill.warnings]
    assert warning.startswith(f"{SEEDS / 'claude-api' / 'SKILL.md'}:3: description: 1068 characters")


def test_a_skill_without_frontmatter_is_told_the_two_fields_with_a_block_to_paste() -> None:
    [problem] = problems_of(SEEDS / "loopy" / "triage")
    first, *example = problem.splitlines()
    assert first.startswith(f"{SEEDS / 'loopy' / 'triage' / 'SKILL.md'}:1: frontmatter: no YAML frontmatter")
    assert "`name`" in first and "`description`" in first
    assert example == ["---", "name: triage", 'description: "Skill stub for the incidents example."', "---"]


def test_the_pasted_block_makes_the_skill_load(tmp_path: Path) -> None:
    folder = tmp_path / "triage"
    shutil.copytree(SEEDS / "loopy" / "triage", folder)
    example = problems_of(folder)[0].split("\n", 1)[1]
    (folder / "SKILL.md").write_text(example + "\n" + (folder / "SKILL.md").read_text())
    skill = load_skill(folder)
    assert (skill.name, skill.description, skill.warnings) == (
        "triage",
        "Skill stub for the incidents example.",
        (),
    )


def test_other_tools_keys_and_names_are_warnings_but_a_name_not_its_folders_is_an_error(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "Deploy_Check"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: Deploy_Check\ndescription: Checks a deploy\nversion: 2\n---\nCheck it.\n"
    )
    warnings = [str(w) for w in load_skill(folder).warnings]
    assert any(":2: name: 'Deploy_Check' is outside the Agent Skills name format" in w for w in warnings)
    assert any(":4: version: not an Agent Skills key" in w for w in warnings)
    (folder / "SKILL.md").write_text("---\nname: deploy-check\ndescription: Checks\n---\n")
    [problem] = problems_of(folder)
    assert ":2: name: 'deploy-check' differs from its folder 'Deploy_Check'" in problem


def test_a_nul_byte_in_skill_md_is_refused_with_its_line(tmp_path: Path) -> None:
    folder = tmp_path / "triage"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: triage\ndescription: d\n---\nbad \x00 byte\n")
    [problem] = problems_of(folder)
    assert problem.endswith("SKILL.md:5: a NUL byte in SKILL.md; it must be plain text")


def test_a_skill_over_its_size_limit_names_the_skill_its_largest_files_and_the_fix() -> None:
    [problem] = problems_of(SEEDS / "canvas-design", SkillLimits(skill_bytes=64 * 1024))
    assert "skill 'canvas-design': its 7 files hold" in problem
    assert "over the limit of 64.0 KB per skill (largest: canvas-fonts/Silkscreen-Regular.ttf" in problem
    assert "move large assets out of the skill folder, or raise OPENLOOP_SKILL_MAX_BYTES" in problem


def test_a_file_over_the_per_file_limit_names_it(tmp_path: Path) -> None:
    folder = tmp_path / "web-artifacts-builder"
    shutil.copytree(SEEDS / "web-artifacts-builder", folder)
    (folder / "assets").mkdir()
    (folder / "assets" / "bundle.bin").write_bytes(b"\x01" * (1024 * 1024 + 1))
    [problem] = problems_of(folder)
    assert problem.startswith(f"{folder / 'assets' / 'bundle.bin'}: skill 'web-artifacts-builder'")
    assert "1.0 MB, over the limit of 1.0 MB per file" in problem
    assert "raise OPENLOOP_SKILL_MAX_FILE_BYTES" in problem
    allowed = load_skill(folder, limits=SkillLimits(file_bytes=2 * 1024 * 1024))
    assert len(allowed.resources["assets/bundle.bin"]) == 1024 * 1024 + 1


def run_validate(*paths: Path) -> tuple[int, list[str]]:
    result = CliRunner().invoke(skills_app, ["validate", *map(str, paths)], env={"COLUMNS": "400"})
    return result.exit_code, result.output.splitlines()


def test_validate_prints_one_line_per_skill_and_fails_only_on_errors() -> None:
    code, lines = run_validate(SEEDS / "claude-api", SEEDS / "theme-factory")
    assert code == 0, lines
    assert lines[0].startswith(f"✓ {SEEDS / 'claude-api' / 'SKILL.md'}: OK: claude-api (1 file, ")
    assert lines[1].startswith(f"  warning {SEEDS / 'claude-api' / 'SKILL.md'}:3: description: 1068")
    assert lines[2].startswith(f"✓ {SEEDS / 'theme-factory' / 'SKILL.md'}: OK: theme-factory (12 files, ")

    code, lines = run_validate(SEEDS)  # a folder of skills: each checked on its own
    assert code == 1
    assert sum(line.startswith("✓ ") for line in lines) == 4
    source = SEEDS / "loopy" / "triage" / "SKILL.md"
    at = lines.index(f"✗ {source}: 1 problem")
    assert lines[at + 1].startswith(f"  {source}:1: frontmatter: no YAML frontmatter")
    assert lines[at + 3] == "    name: triage"
