"""`openloop slack manifest`: the scopes and events follow the agents' config, nothing more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from config.agent import AgentConfig
from surfaces.cli.main import app
from surfaces.slack.manifest import BASE_SCOPES, manifest, needs


def agent(slack: dict[str, Any] | None = None, **spec: Any) -> AgentConfig:
    surfaces = {"slack": {"channels": ["C0DEV"], **slack}} if slack is not None else {"cli": True}
    return AgentConfig.model_validate(
        {
            "apiVersion": "openloop.ai/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": "helper"},
            "spec": {"surfaces": surfaces, **spec},
        }
    )


def test_a_plain_slack_agent_needs_the_base_scopes_and_app_home() -> None:
    need = needs([agent({})])
    assert need.scopes == sorted(BASE_SCOPES)
    assert "app_home_opened" in need.events and "app_mention" in need.events
    for extra in ("files:write", "usergroups:read", "assistant:write", "im:history"):
        assert extra not in need.scopes


def test_each_extra_scope_comes_from_the_config_that_needs_it() -> None:
    groups = needs([agent({"triggers": {"usergroups": ["S0ONCALL"]}})])
    assert "usergroups:read" in groups.scopes
    group_approver = agent({}, approvals={"approvers": ["S0MAINT"]})
    handle_approver = agent({}, approvals={"approvers": ["@maintainers"]})
    user_approver = agent({}, approvals={"approvers": ["U0LEAD", "cli:local"]})
    assert "usergroups:read" in needs([group_approver]).scopes
    assert "usergroups:read" in needs([handle_approver]).scopes
    assert "usergroups:read" not in needs([user_approver]).scopes
    pull_requests = agent(
        {}, tools=[{"name": "github.create_pull_request", "permissions": ["pull_requests:write"]}]
    )
    assert "files:write" in needs([pull_requests]).scopes  # Show diff posts the diff as a file
    assistant = needs([agent({"assistant": True})])
    assert {"assistant:write", "im:history"} <= set(assistant.scopes)
    assert "assistant_thread_started" in assistant.events and "message.im" in assistant.events
    no_home = needs([agent({"app_home": False})])
    assert "app_home_opened" not in no_home.events
    assert needs([agent(None)]).scopes == [] and needs([]).events == []  # no Slack, no scopes


def test_socket_mode_has_no_request_urls_and_the_events_api_has_both() -> None:
    socket = manifest([agent({})], socket_mode=True, base_url=None)
    settings: Any = socket["settings"]
    assert settings["socket_mode_enabled"] is True
    assert "request_url" not in settings["event_subscriptions"]
    assert "request_url" not in settings["interactivity"]
    http: Any = manifest([agent({})], socket_mode=False, base_url="https://agents.acme.test/")["settings"]
    assert http["socket_mode_enabled"] is False
    assert http["event_subscriptions"]["request_url"] == "https://agents.acme.test/slack/events"
    assert http["interactivity"]["request_url"] == "https://agents.acme.test/slack/interactivity"


def test_the_command_prints_the_manifest_for_agent_files(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    document = agent({"triggers": {"usergroups": ["S0ONCALL"]}}).model_dump(
        mode="json", exclude_defaults=True
    )
    path.write_text(yaml.safe_dump(document))
    result = CliRunner().invoke(
        app, ["slack", "manifest", "-f", str(path), "--socket-mode"], env={"SLACK_APP_TOKEN": ""}
    )
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.stdout)
    assert printed["settings"]["socket_mode_enabled"] is True
    assert printed["oauth_config"]["scopes"]["bot"] == sorted([*BASE_SCOPES, "usergroups:read"])
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: openloop.ai/v1alpha1\nkind: Agent\nmetadata: {name: Bad_Name}\n")
    failed = CliRunner().invoke(app, ["slack", "manifest", "-f", str(broken)])
    assert failed.exit_code == 1 and "metadata.name" in failed.output
