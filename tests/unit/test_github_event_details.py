"""Small things GitHub payloads must get right: mentions inside code spans that wrap lines,
and workflow runs without a name."""

from __future__ import annotations

from config.surfaces import GitHubSurface
from surfaces.github import events
from surfaces.github.webhooks import parse_body
from tests.integration.github_env import failed_run


def test_a_mention_inside_a_code_span_across_lines_is_not_a_request() -> None:
    assert not events.mentions("Run `make test\n@openloop ci` to check", "openloop")
    assert not events.mentions("See ``a ` b\n@openloop c``", "openloop")
    assert events.mentions("`code` and then\n@openloop please look", "openloop")
    # A blank line ends the paragraph, so a lone backtick does not hide what follows.
    assert events.mentions("a stray ` here\n\n@openloop please look `x`", "openloop")


def test_a_workflow_run_without_a_name_reads_naturally() -> None:
    config = GitHubSurface(repos=["acme/app"], ci={"enabled": True, "branches": ["main"]})
    payload = failed_run("acme/app", "main", None)
    payload["workflow_run"]["name"] = ""
    decision = events.decide("workflow_run", payload, config)
    assert isinstance(decision, events.Trigger)
    assert "workflow run #4" in decision.request and "''" not in decision.request
    payload["workflow_run"]["name"] = "CI"
    named = events.decide("workflow_run", payload, config)
    assert isinstance(named, events.Trigger) and "workflow 'CI' run #4" in named.request


def test_json_and_form_encoded_bodies_give_the_same_payload() -> None:
    body = b'{"zen": "a & b = c"}'
    form = b"payload=%7B%22zen%22%3A+%22a+%26+b+%3D+c%22%7D"
    assert parse_body(body, "application/json") == {"zen": "a & b = c"}
    assert parse_body(form, "application/x-www-form-urlencoded") == {"zen": "a & b = c"}
    for bad, kind in (
        (b"payload=%7Bnot", "application/x-www-form-urlencoded"),
        (b"x=1", "application/x-www-form-urlencoded"),
        (b"Hello", "application/json"),
    ):
        try:
            parse_body(bad, kind)
        except ValueError:
            continue
        raise AssertionError(bad)
