"""YAML alias bombs ("billion laughs") in every file the project reads: refused at once with
the file and line, never minutes of work ending in a MemoryError. Ordinary aliases still load."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from config.loader import load_agent_file, parse_agent
from config.loop import load_loop_file
from config.playbooks import compile_playbooks
from config.problems import AgentConfigError
from config.skills import load_skill

# Generous: the check is linear in the text and takes milliseconds; a bomb read without it
# runs for tens of seconds, then dies of memory.
SECONDS = 5.0
# Nine levels of nine: 9**9 (387 million) strings from ten short lines.
BOMB_LINES = ['lol0: &lol0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'] + [
    f"lol{level}: &lol{level} [" + ", ".join([f"*lol{level - 1}"] * 9) + "]" for level in range(1, 9)
]
# With the limit at 10,000 values beyond those written, the fifth line (lol4) is the first past it.
FIRST_PAST = 5


def bomb(indent: str = "") -> str:
    return "".join(f"{indent}{line}\n" for line in BOMB_LINES)


def refused(read: Callable[[], object]) -> list[str]:
    started = time.monotonic()
    with pytest.raises(AgentConfigError) as caught:
        read()
    assert time.monotonic() - started < SECONDS
    return [str(problem) for problem in caught.value.problems]


def assert_bomb_named(problems: list[str], where: str) -> None:
    assert any(p.startswith(where) and "alias bomb" in p for p in problems), problems


def test_an_agent_file_with_an_alias_bomb_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("apiVersion: openloop.ai/v1alpha1\nkind: Agent\nmetadata: {name: bomb}\n" + bomb())
    assert_bomb_named(refused(lambda: load_agent_file(path)), f"{path}:{3 + FIRST_PAST}:")


def test_a_loop_file_with_an_alias_bomb_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("apiVersion: openloop.ai/v1alpha1\nkind: Loop\nspec:\n" + bomb("  "))
    assert_bomb_named(refused(lambda: load_loop_file(path)), f"{path}:{3 + FIRST_PAST}:")


def test_a_skill_frontmatter_with_an_alias_bomb_is_refused_at_its_line(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "bomb"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: bomb\ndescription: Laughs.\n" + bomb() + "---\nBody.\n")
    where = f"{folder / 'SKILL.md'}:{3 + FIRST_PAST}:"
    assert_bomb_named(refused(lambda: load_skill(folder, folder.parent)), where)


def test_a_registry_and_a_step_file_with_alias_bombs_are_refused_at_their_lines(tmp_path: Path) -> None:
    root = tmp_path / "playbooks"
    (root / "triage").mkdir(parents=True)
    (root / "registry.yaml").write_text("events:\n  Go:\n    fields: {x: str}\n" + bomb())
    (root / "triage" / "look.md").write_text("---\non: Go\nagent: coder\n" + bomb() + "---\nLook.\n")
    started = time.monotonic()
    report = compile_playbooks(root, {"coder"})
    assert time.monotonic() - started < SECONDS
    problems = [str(problem) for problem in report.errors]
    assert_bomb_named(problems, f"{root / 'registry.yaml'}:{3 + FIRST_PAST}:")
    assert_bomb_named(problems, f"{root / 'triage' / 'look.md'}:{3 + FIRST_PAST}:")


def test_a_merge_key_bomb_is_refused_too() -> None:
    lines = ["m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9}"] + [
        f"m{n}: &m{n} {{<<: [" + ", ".join([f"*m{n - 1}"] * 9) + "]}" for n in range(1, 9)
    ]
    problems = refused(lambda: parse_agent("\n".join(lines) + "\n", "merge.yaml"))
    assert any(p.startswith("merge.yaml:") and "alias bomb" in p for p in problems), problems


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    problems = refused(lambda: parse_agent("kind: Agent\nloop: &loop [1, *loop]\n", "self.yaml"))
    assert any(p.startswith("self.yaml:2:") and "recursive anchor" in p for p in problems), problems


def test_ordinary_aliases_still_load() -> None:
    text = """\
apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata: {name: helper, description: &about Answers questions about the team's runbooks.}
spec:
  model_policy: {default: openai/gpt-4o-mini}
  tools:
    - {name: memory.search, permissions: [memory:read]}
  instructions: *about
"""
    agent = parse_agent(text, "helper.yaml")
    assert agent.spec.instructions == "Answers questions about the team's runbooks."
