"""`spec.surfaces.zoom` as a user writes it: which meetings an agent takes, where the summary
goes (by default its first Slack channel), and the errors — file, line, field and the fix —
when it has nowhere of its own to go. The seed form's `{type: zoom, host: ...}` reads the same;
`openloop doctor` names the secret token a Zoom agent needs."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from activities.store.agents import StoredAgent, binding_conflicts
from config.loader import AgentConfigError, parse_agent
from config.settings import Settings
from surfaces.cli.doctor import surface_checks


def agent(surfaces: str) -> str:
    return f"""apiVersion: openloop.ai/v1alpha1
kind: Agent
metadata:
  name: scribe
spec:
  surfaces:
{surfaces}
"""


def test_the_summary_goes_to_the_first_slack_channel_unless_post_to_says() -> None:
    default = parse_agent(agent("    slack:\n      channels: [C0DEV, C0OPS]\n    zoom:\n      hosts: [U1]"))
    assert default.spec.surfaces.zoom_target() == ("slack", "C0DEV")
    chosen = parse_agent(
        agent(
            "    slack:\n      channels: [C0DEV, C0OPS]\n    zoom:\n      hosts: [U1]\n"
            "      post_to: {surface: slack, channel: C0OPS}"
        )
    )
    assert chosen.spec.surfaces.zoom_target() == ("slack", "C0OPS")


def test_hosts_by_id_or_email_and_a_whole_account() -> None:
    zoom = parse_agent(
        agent("    slack:\n      channels: [C0DEV]\n    zoom:\n      hosts: [U1, Alice@Example.com]")
    ).spec.surfaces.zoom
    assert zoom is not None
    assert zoom.takes("U1", "", "ACC") and zoom.takes("U9", "alice@example.com", "ACC")
    assert not zoom.takes("u1", "bob@example.com", "ACC")  # ids are case-sensitive, emails are not
    account = parse_agent(agent("    slack:\n      channels: [C0DEV]\n    zoom:\n      account: ACC")).spec
    assert account.surfaces.zoom is not None and account.surfaces.zoom.takes("U9", "", "ACC")
    assert not account.surfaces.zoom.takes("U9", "", "OTHER")


@pytest.mark.parametrize(
    ("surfaces", "line", "field", "fix"),
    [
        ("    zoom:\n      hosts: [U1]", 7, "spec.surfaces.zoom.post_to", "set post_to"),
        (
            "    slack:\n      channels: [C0DEV]\n    zoom:\n      hosts: [U1]\n"
            "      post_to: {surface: slack, channel: C0ELSEWHERE}",
            11,
            "spec.surfaces.zoom.post_to.channel",
            "bind it under spec.surfaces.slack.channels",
        ),
        (
            "    slack:\n      channels: [C0DEV]\n    zoom: {}",
            9,
            "spec.surfaces.zoom.hosts",
            "name the hosts",
        ),
    ],
    ids=["nowhere", "not-bound", "no-meetings"],
)
def test_nowhere_of_its_own_to_post_is_an_error_naming_the_field_and_the_fix(
    surfaces: str, line: int, field: str, fix: str
) -> None:
    with pytest.raises(AgentConfigError) as raised:
        parse_agent(agent(surfaces), "scribe.yaml")
    [problem] = raised.value.problems
    assert (problem.file, problem.field) == ("scribe.yaml", field)
    assert problem.line == line and fix in problem.message


def test_the_seed_form_takes_a_zoom_item() -> None:
    config = parse_agent(
        agent(
            "    - {type: slack, channel: C0DEV}\n"
            "    - {type: zoom, host: alice@example.com, post_to: {surface: slack, channel: C0DEV}}"
        )
    )
    assert config.spec.surfaces.zoom is not None and config.spec.surfaces.zoom.hosts == ["alice@example.com"]


def test_doctor_names_the_secret_token_a_zoom_agent_needs() -> None:
    config = parse_agent(agent("    slack:\n      channels: [C0DEV]\n    zoom:\n      hosts: [U1]"))
    stored = [StoredAgent(config, 1, None, "")]  # type: ignore[arg-type]
    [missing] = [c for c in surface_checks(Settings(), stored, []) if c.name == "zoom"]
    assert not missing.ok and "ZOOM_WEBHOOK_SECRET_TOKEN" in missing.detail
    settings = Settings(zoom_webhook_secret_token=SecretStr("s"))
    [ok] = [c for c in surface_checks(settings, stored, []) if c.name == "zoom"]
    assert ok.ok


def test_two_agents_cannot_take_the_same_hosts_meetings() -> None:
    mine = parse_agent(
        agent("    slack:\n      channels: [C0DEV]\n    zoom:\n      hosts: [Alice@Example.com]")
    )
    theirs = parse_agent(
        agent("    slack:\n      channels: [C0OPS]\n    zoom:\n      hosts: [alice@example.com, U2]")
    )
    theirs = theirs.model_copy(update={"metadata": theirs.metadata.model_copy(update={"name": "other"})})
    [conflict] = binding_conflicts(mine, [theirs])
    assert "the Zoom meetings of alice@example.com" in conflict and "'other'" in conflict
