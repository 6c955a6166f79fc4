"""The Discord surface's pure parts: what it posts, what a button carries, who may ask, and
Discord's Ed25519 signature on an interaction."""

from __future__ import annotations

import time

import pytest
from nacl.signing import SigningKey

from activities.discord import messages
from config.surfaces import DiscordSurface, DiscordTriggers
from surfaces.discord.events import DiscordMessage, may_trigger, request_text
from surfaces.discord.verify import MAX_AGE_SECONDS, signature_problem
from workflows.message_types import ApprovalRequest
from workflows.types import TaskStatus


def request(**overrides: object) -> ApprovalRequest:
    fields: dict[str, object] = {
        "request_id": "apr-task-discord-120000000000000000-3-abcdef012345",
        "action_id": "act-1",
        "tool": "github.create_issue",
        "arguments": {"repo": "acme/decisions", "title": "Track: use Postgres"},
        "approvers": ["discord:role:maintainers", "discord:1300000000000000002"],
        "requested_at_iso": "2026-11-27T10:00:00+00:00",
        "expires_at_iso": "2026-11-30T10:00:00+00:00",
        "model": "offline/echo",
        "estimated_cost_usd": 0.0042,
    }
    return ApprovalRequest(**{**fields, **overrides})  # type: ignore[arg-type]


def test_a_long_answer_is_split_at_lines_under_discords_limit() -> None:
    text = "\n".join(f"line {n} " + "x" * 90 for n in range(60))
    parts = messages.split_content(text)
    assert len(parts) > 1 and all(len(p) <= messages.MAX_CONTENT for p in parts)
    assert "\n".join(parts) == text  # nothing lost, every cut at a line
    assert messages.split_content("y" * 4500) == ["y" * 2000, "y" * 2000, "y" * 500]


def test_the_approval_message_names_approvers_and_its_buttons_point_at_the_request() -> None:
    task_id = "task-discord-1200000000000000099"
    body = messages.approval_message(task_id, "scribe", request())
    assert "`discord:role:maintainers`" in str(body["content"])  # a role by name stays as written
    assert "<@1300000000000000002>" in str(body["content"])
    [row] = body["components"]  # type: ignore[misc]
    approve, deny = row["components"]
    assert (approve["label"], deny["label"]) == ("Approve", "Deny")
    verb, task, hashed = messages.parse_button_id(approve["custom_id"]) or ("", "", "")
    assert (verb, task) == (messages.APPROVE, task_id)
    assert hashed == messages.request_hash(request().request_id)
    assert all(len(b["custom_id"]) <= messages.MAX_CUSTOM_ID for b in (approve, deny))
    assert messages.parse_button_id("ol:x:task:0123456789abcdef") is None
    assert messages.parse_button_id("something-else") is None


def test_role_ids_render_as_role_mentions_and_other_identities_as_code() -> None:
    assert messages.mention("discord:role:1400000000000000001") == "<@&1400000000000000001>"
    assert messages.mention("discord:1300000000000000002") == "<@1300000000000000002>"
    assert messages.mention("U01ALICE") == "`U01ALICE`"


def test_a_task_id_too_long_for_a_button_is_refused_rather_than_cut() -> None:
    with pytest.raises(ValueError, match="too long"):
        messages.button_id(messages.APPROVE, "task-" + "x" * 90, "apr-1")


def test_a_decided_request_loses_its_buttons_and_says_who_decided() -> None:
    body = messages.resolved_message(request(), "approved", "discord:1300000000000000003")
    assert body["components"] == []
    assert "Approved" in str(body["content"]) and "<@1300000000000000003>" in str(body["content"])


def test_a_reply_waiting_for_the_person_says_how_to_answer() -> None:
    assert "Reply in this thread" in messages.reply_suffix(TaskStatus.WAITING_USER)
    assert messages.reply_suffix(TaskStatus.SUCCESS) == ""
    assert "approval denied" in messages.reply_suffix(TaskStatus.APPROVAL_DENIED)


def test_channels_bind_by_id_or_by_the_name_the_agent_file_uses() -> None:
    surface = DiscordSurface(channels=["#eng", "1200000000000000005"])
    assert surface.channels == ["eng", "1200000000000000005"]
    assert surface.binds("1200000000000000009", "Eng")
    assert surface.binds("1200000000000000005", None)
    assert not surface.binds("1200000000000000009", "ops")


def test_triggers_admit_listed_people_and_roles_only_when_lists_are_set() -> None:
    open_to_all = DiscordSurface(channels=["eng"])
    assert may_trigger(open_to_all, "1", [], [])
    listed = DiscordSurface(
        channels=["eng"], triggers=DiscordTriggers(users=["7"], roles=["maintainers", "55"])
    )
    assert may_trigger(listed, "7", [], [])
    assert may_trigger(listed, "8", ["55"], [])
    assert may_trigger(listed, "9", ["66"], ["Maintainers"])
    assert not may_trigger(listed, "10", ["66"], ["guests"])
    nobody = DiscordSurface(channels=["eng"], triggers=DiscordTriggers(everyone=False))
    assert not may_trigger(nobody, "1", [], [])


def test_the_request_is_the_message_without_the_bots_mention() -> None:
    assert request_text("<@42> summarise this <@7>", "42") == "summarise this <@7>"
    assert request_text("<@!42>   ", "42") == "Read this thread and help with it."


def test_a_recorded_message_round_trips_through_the_inbox_payload() -> None:
    message = DiscordMessage("3", "11", "eng", "10", "1", "5", "alice", "hi", False, ["9"], ["maintainers"])
    again = DiscordMessage.from_payload(message.as_payload())
    assert again == message and again.channel == "10" and again.in_thread and again.user == "discord:5"


def signed(key: SigningKey, body: bytes, at: float) -> tuple[str, str]:
    timestamp = str(int(at))
    return key.sign(timestamp.encode() + body).signature.hex(), timestamp


def test_discords_signature_is_checked_with_the_applications_public_key() -> None:
    key, other = SigningKey.generate(), SigningKey.generate()
    public = key.verify_key.encode().hex()
    body = b'{"type":1,"id":"1"}'
    now = time.time()
    assert signature_problem(public, *signed(key, body, now), body) is None
    assert signature_problem(public, *signed(other, body, now), body) == "signature does not match"
    assert signature_problem(public, *signed(key, body, now), body + b" ") == "signature does not match"
    stale = signature_problem(public, *signed(key, body, now - MAX_AGE_SECONDS - 60), body)
    assert stale is not None and "replay" in stale
    assert signature_problem(public, None, None, body) is not None
    assert (
        signature_problem("not-hex", *signed(key, body, now), body)
        == "DISCORD_PUBLIC_KEY is not a hex Ed25519 key"
    )
