"""Every console of the CLI prints text as written: `file:100: field` never becomes an emoji.

rich replaces `:name:` codes with emoji by default, and `:100:` is one, so a problem reported on
line 100 of a file printed as `file💯 field`. Each console is made with emoji off; the first
test checks the source so a new console cannot forget it, the second checks what a user sees.
"""

from __future__ import annotations

import ast
from pathlib import Path

from typer.testing import CliRunner

from surfaces.cli.main import app

ROOT = Path(__file__).resolve().parents[2]


def _consoles_with_emoji_on() -> list[str]:
    found = []
    for path in sorted([*ROOT.joinpath("surfaces").rglob("*.py"), *ROOT.joinpath("bench").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Console"):
                continue
            emoji = next((k.value for k in node.keywords if k.arg == "emoji"), None)
            if not (isinstance(emoji, ast.Constant) and emoji.value is False):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_console_has_emoji_off() -> None:
    assert _consoles_with_emoji_on() == []


def test_a_problem_on_line_100_prints_its_line_number(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    padding = "".join(f"# line {n}\n" for n in range(1, 96))
    agent.write_text(
        padding + "apiVersion: openloop.ai/v1alpha1\nkind: Agent\nmetadata:\n  name: x\n  colour: blue\n"
    )
    done = CliRunner().invoke(app, ["agents", "validate", "-f", str(agent)])
    assert done.exit_code == 1, done.output
    assert f"{agent}:100: metadata.colour" in done.output
    assert "💯" not in done.output
