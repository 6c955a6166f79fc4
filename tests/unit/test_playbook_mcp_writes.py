"""An agent's MCP write tools count as writes for playbook approvals: `openloop playbooks compile
--agents` names an ungated one, `require_for` covers them by name or glob, and a step with
`approval: required` gates them in the task it starts (`server.tool` rules)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from activities.tools.catalog import writes_of
from config.agent import AgentConfig
from surfaces.cli.main import app
from workflows import policy
from workflows.playbook_step import gated_agent

ENV = {"COLUMNS": "200"}
NOTES = (
    "  mcp_servers:\n"
    "    - {name: notes, transport: stdio, command: [notes-server], allow: [read_note, create_*],"
    " writes: [create_*]}\n"
)


def agent_file(folder: Path, approvals: str = "") -> Path:
    path = folder / "agents" / "noter.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    spec = NOTES + (
        f"  approvals: {{require_for: [{approvals}], approvers: [cli:local]}}\n" if approvals else ""
    )
    path.write_text(
        f"apiVersion: openloop.ai/v1alpha1\nkind: Agent\nmetadata: {{name: noter}}\nspec:\n{spec}"
    )
    return path


def playbook_folder(folder: Path, approval: str = "") -> Path:
    step = folder / "playbooks" / "nightly" / "note.md"
    step.parent.mkdir(parents=True, exist_ok=True)
    extra = f"approval: {approval}\n" if approval else ""
    step.write_text(f'---\non: cron("0 3 * * *")\nagent: noter\n{extra}---\nWrite a note.\n')
    return step.parent.parent


@pytest.mark.parametrize(
    ("approvals", "approval", "ok"),
    [("", "", False), ("notes.create_note", "", False), ("notes.*", "", True), ("", "required", True)],
)
def test_compile_counts_an_mcp_servers_writes(
    tmp_path: Path, approvals: str, approval: str, ok: bool
) -> None:
    agents = agent_file(tmp_path, approvals)
    folder = playbook_folder(tmp_path, approval)
    result = CliRunner().invoke(
        app, ["playbooks", "compile", "--dir", str(folder), "--agents", str(agents)], env=ENV
    )
    assert result.exit_code == (0 if ok else 1), result.output
    ungated = "agent 'noter' may call notes.create_*, which write, without an approval"
    assert (ungated in result.output) is not ok, result.output


def test_approval_required_gates_the_mcp_writes_a_task_lists() -> None:
    agent = AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": "noter"},
            "spec": {
                "mcp_servers": [
                    {
                        "name": "notes",
                        "transport": "stdio",
                        "command": ["notes-server"],
                        "allow": ["read_note", "create_*"],
                        "writes": ["create_*"],
                    }
                ]
            },
        }
    )
    assert writes_of(agent).ungated == ["notes.create_*"]
    gated = gated_agent(agent, [])
    assert policy.needs_approval(gated, "notes.create_note") and policy.needs_approval(
        gated, "notes.create_x"
    )
    assert not policy.needs_approval(gated, "notes.read_note")
    assert not policy.needs_approval(agent, "notes.create_note")
