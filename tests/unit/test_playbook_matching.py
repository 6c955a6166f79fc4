"""Which GitHub deliveries and Slack events match a registered playbook event, and the event's
fields found in their payloads."""

from __future__ import annotations

from typing import Any

from surfaces.playbook_events import fields_of, github_matches, lookup, slack_matches
from workflows.playbook_types import EventType, FieldKind, TypedField

CI_FAILED = EventType(
    name="CIFailed",
    fields=tuple(
        TypedField(name=name, kind=FieldKind.STR)
        for name in ("repo", "branch", "run_id", "run_url", "workflow", "head_sha", "missing")
    ),
    source="github",
    match={
        "event": "workflow_run",
        "action": "completed",
        "conclusion": "failure",
        "branch": ["main", "release"],
    },
)
RUN: dict[str, Any] = {
    "action": "completed",
    "repository": {"full_name": "acme/api"},
    "workflow": {"name": "an object, never a field value"},
    "workflow_run": {
        "id": 7, "name": "tests", "conclusion": "failure", "head_branch": "main",
        "head_sha": "abc", "html_url": "https://ci/7",
    },
}  # fmt: skip


def with_run(**changes: Any) -> dict[str, Any]:
    return {**RUN, "workflow_run": {**RUN["workflow_run"], **changes}}


def test_a_failed_run_on_a_listed_branch_matches_and_its_fields_are_found() -> None:
    assert github_matches(CI_FAILED, "workflow_run", RUN)
    assert github_matches(CI_FAILED, "workflow_run", with_run(head_branch="release"))
    assert fields_of(CI_FAILED, RUN, "workflow_run") == {
        "repo": "acme/api", "branch": "main", "run_id": 7, "run_url": "https://ci/7",
        "workflow": "tests", "head_sha": "abc",
    }  # fmt: skip


def test_another_event_type_conclusion_branch_or_action_does_not_match() -> None:
    assert not github_matches(CI_FAILED, "check_run", RUN)
    assert not github_matches(CI_FAILED, "workflow_run", with_run(conclusion="success"))
    assert not github_matches(CI_FAILED, "workflow_run", with_run(head_branch="feature"))
    assert not github_matches(CI_FAILED, "workflow_run", {**RUN, "action": "requested"})
    assert not github_matches(CI_FAILED, "workflow_run", {"action": "completed"})  # nothing to compare


def test_lookup_reads_dotted_paths_and_a_push_refs_branch() -> None:
    assert lookup(RUN, "workflow_run.head_sha") == "abc"
    assert lookup({"ref": "refs/heads/main"}, "branch", "push") == "main"
    assert lookup(RUN, "nothing", "workflow_run") is None


def test_slack_messages_mentions_and_reactions_match_by_kind_and_channel() -> None:
    deploys = EventType(
        name="D", source="slack", match={"kind": "message", "channel": "C1", "pattern": "^deploy "}
    )
    message = {"type": "message", "channel": "C1", "user": "U1", "text": "deploy api", "ts": "1.1"}
    assert slack_matches(deploys, message)
    assert not slack_matches(deploys, {**message, "channel": "C2"})
    assert not slack_matches(deploys, {**message, "text": "please deploy api"})
    assert not slack_matches(deploys, {**message, "bot_id": "B1"})  # a bot's message, perhaps our own
    assert not slack_matches(deploys, {**message, "subtype": "message_changed"})
    mention = EventType(name="M", source="slack", match={"kind": "mention"})
    assert slack_matches(mention, {"type": "app_mention", "channel": "C9", "text": "<@U0> hi"})
    assert not slack_matches(mention, message)
    alarm = EventType(
        name="R", source="slack", match={"kind": "reaction", "name": "rotating_light", "channel": "C1"}
    )
    reaction = {
        "type": "reaction_added",
        "reaction": "rotating_light",
        "item": {"channel": "C1", "ts": "1.1"},
    }
    assert slack_matches(alarm, reaction)
    assert not slack_matches(alarm, {**reaction, "reaction": "eyes"})
    assert not slack_matches(alarm, {**reaction, "item": {"channel": "C2"}})
