"""Constructs of the other public Loopy examples, each in a minimal project written here: the
built-in `Github.*` triggers and the fields a delivery gives them, an event field called
`description`, an emitted event whose fields the step leaves to its agent, and a sensor that
yields its events."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from config.playbooks import compile_playbooks
from surfaces.playbook_events import fields_of, github_matches
from workflows.playbook_types import FieldKind

AGENTS = """\
defaults:
  agent: {model: claude-sonnet-4-6, harness: claude-code}
agents:
  Scribe: {}
"""


def _project(root: Path, registry: str, steps: dict[str, str], sensors: str | None = None) -> Path:
    (root / "registry.yml").write_text(textwrap.dedent(registry))
    for relative, text in steps.items():
        path = root / "workflows" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    if sensors is not None:
        (root / "sensors").mkdir()
        (root / "sensors" / "sensors.py").write_text(textwrap.dedent(sensors))
    return root


# examples/changelog and examples/github (scan/find-work.md): `on: Github.PullRequestMerged`.
CHANGELOG = """\
---
on: Github.PullRequestMerged
agent: Scribe
output: {entry: str}
---
PR #{{ event.number }} ("{{ event.title }}") in {{ event.repo }} was merged by {{ event.merged_by }}.
"""

MERGED = {
    "action": "closed",
    "number": 7,
    "repository": {"full_name": "octo/app"},
    "pull_request": {
        "number": 7,
        "title": "Add retries",
        "merged": True,
        "url": "https://api.github.com/repos/octo/app/pulls/7",
        "html_url": "https://github.com/octo/app/pull/7",
        "merged_by": {"login": "mona"},
    },
}


def test_a_built_in_github_trigger_needs_no_registry_entry(tmp_path: Path) -> None:
    report = compile_playbooks(_project(tmp_path, AGENTS, {"changelog/entry.md": CHANGELOG}))

    assert report.ok, [str(e) for e in report.errors]
    [playbook] = report.playbooks
    assert playbook.trigger.event == "Github.PullRequestMerged"
    event = report.events["Github.PullRequestMerged"]
    assert event.source == "github"
    assert [(f.name, f.kind) for f in event.fields] == [
        ("number", FieldKind.INT),
        ("repo", FieldKind.STR),
        ("title", FieldKind.STR),
        ("url", FieldKind.STR),
        ("merged_by", FieldKind.STR),
    ]


def test_a_merged_pull_request_delivery_gives_the_built_in_events_fields(tmp_path: Path) -> None:
    report = compile_playbooks(_project(tmp_path, AGENTS, {"changelog/entry.md": CHANGELOG}))
    event = report.events["Github.PullRequestMerged"]

    assert github_matches(event, "pull_request", MERGED)
    assert fields_of(event, MERGED, "pull_request") == {
        "number": 7,
        "repo": "octo/app",
        "title": "Add retries",
        "url": "https://github.com/octo/app/pull/7",  # the page, not the API's url
        "merged_by": "mona",
    }
    closed = {**MERGED, "pull_request": {**MERGED["pull_request"], "merged": False}}  # type: ignore[dict-item]
    assert not github_matches(event, "pull_request", closed)
    assert not github_matches(event, "pull_request", {**MERGED, "action": "opened"})


def test_a_comment_and_a_push_give_their_flags_and_counts(tmp_path: Path) -> None:
    steps = {
        "answer/reply.md": "---\non: Github.IssueCommentCreated\nagent: Scribe\n---\n{{ event.body }}\n",
        "notes/log.md": "---\non: Github.Push\nagent: Scribe\n---\n{{ event.commit_count }}\n",
    }
    report = compile_playbooks(_project(tmp_path, AGENTS, steps))
    comment = {
        "action": "created",
        "repository": {"full_name": "octo/app"},
        "issue": {"number": 3, "pull_request": {"url": "..."}},
        "comment": {"body": "ship it", "user": {"login": "mona"}, "html_url": "https://c"},
    }
    push = {"ref": "refs/heads/main", "pusher": {"name": "mona"}, "commits": [{}, {}], "repository": {}}

    assert report.ok, [str(e) for e in report.errors]
    got = fields_of(report.events["Github.IssueCommentCreated"], comment, "issue_comment")
    assert (got["issue_number"], got["author"], got["on_pull_request"]) == (3, "mona", True)
    pushed = fields_of(report.events["Github.Push"], push, "push")
    assert (pushed["ref"], pushed["commit_count"]) == ("refs/heads/main", 2)


def test_an_unknown_or_emitted_built_in_is_refused_at_its_line(tmp_path: Path) -> None:
    registry = AGENTS + "events:\n  Done: {note: str}\n"
    steps = {
        "a/x.md": "---\non: Github.PullRequestClosed\nagent: Scribe\n---\nx\n",
        "b/y.md": "---\non: Done\nagent: Scribe\noutput: {number: int}\nemits: Github.Push\n---\ny\n",
        "c/z.md": "---\non: Sentry.IssueCreated\nagent: Scribe\n---\nz\n",
    }
    report = compile_playbooks(_project(tmp_path, registry, steps))

    errors = {(Path(e.file).name, e.line, e.field): e.message for e in report.errors}
    assert "the GitHub ones are: Github.PullRequestOpened" in errors[("x.md", 2, "on")]
    assert "emit an event of your own" in errors[("y.md", 5, "emits")]
    assert "register the event in registry.yml" in errors[("z.md", 2, "on")]


# examples/resolve: `WorkItem: {link: url, description: str}`, a field named like a setting.
def test_a_bare_field_named_description_is_a_field(tmp_path: Path) -> None:
    registry = AGENTS + "events:\n  WorkItem:\n    link: url\n    description: str\n"
    step = "---\non: WorkItem\nagent: Scribe\n---\n{{ event.description }} at {{ event.link }}\n"
    report = compile_playbooks(_project(tmp_path, registry, {"resolve/arbitrate.md": step}))

    assert report.ok, [str(e) for e in report.errors]
    assert [f.name for f in report.events["WorkItem"].fields] == ["link", "description"]


def test_a_description_that_is_not_a_type_still_describes_the_event(tmp_path: Path) -> None:
    registry = AGENTS + "events:\n  WorkItem:\n    description: Work to do\n    link: url\n"
    report = compile_playbooks(
        _project(tmp_path, registry, {"r/a.md": "---\non: WorkItem\nagent: Scribe\n---\nx\n"})
    )

    # The structured form, as before: the field belongs under `fields:`, said at its line.
    assert [(e.line, e.field) for e in report.errors] == [(8, "events.WorkItem.link")]
    assert "go under `fields:`" in report.errors[0].message


# examples/auto-research (ideate/hypothesize.md, writeup/reflect.md): the prose sets `origin`
# and `depth`, which neither the output nor the triggering event holds.
RESEARCH = (
    AGENTS
    + """\
events:
  PaperDigest: {paper_id: str, claims: str}
  Hypothesis: {origin: str, statement: str, depth: int}
"""
)
HYPOTHESIZE = """\
---
on: PaperDigest
agent: Scribe
emits: Hypothesis
output:
  statement: str
---
Set origin to {{ event.paper_id }} and depth to 1.
"""


def test_emitted_fields_left_to_the_agent_are_asked_for_with_its_output(tmp_path: Path) -> None:
    report = compile_playbooks(_project(tmp_path, RESEARCH, {"ideate/hypothesize.md": HYPOTHESIZE}))

    assert report.ok, [str(e) for e in report.errors]
    step = report.playbooks[0].step("hypothesize")
    assert [(f.name, f.kind) for f in step.output] == [
        ("statement", FieldKind.STR),
        ("origin", FieldKind.STR),
        ("depth", FieldKind.INT),
    ]
    [warning] = [w for w in report.warnings if w.field == "emits"]
    assert (Path(warning.file).name, warning.line) == ("hypothesize.md", 4)
    assert "origin: str, depth: int not in `output:`" in warning.message


def test_an_emitted_field_of_the_wrong_type_is_still_an_error(tmp_path: Path) -> None:
    step = HYPOTHESIZE.replace("statement: str", "statement: str\n  depth: str")
    report = compile_playbooks(_project(tmp_path, RESEARCH, {"ideate/hypothesize.md": step}))

    [error] = report.errors
    assert (error.line, error.field) == (4, "emits")
    assert "depth: int (the output says str)" in error.message


# examples/auto-research/sensors/sensors.py: one poll yields a PaperFound per paper.
def test_a_sensor_that_yields_is_warned_at_its_function(tmp_path: Path) -> None:
    sensors = """\
    from loopy import sensor


    @sensor(poll="6h", emits="PaperFound")
    def arxiv_poll(req):
        return
        yield
    """
    registry = AGENTS + "events:\n  PaperFound: {title: str}\n"
    step = "---\non: PaperFound\nagent: Scribe\n---\n{{ event.title }}\n"
    report = compile_playbooks(_project(tmp_path, registry, {"digest/read.md": step}, sensors))

    assert report.ok, [str(e) for e in report.errors]
    [warning] = [w for w in report.warnings if w.field == "sensor"]
    assert (Path(warning.file).name, warning.line) == ("sensors.py", 5)
    assert "arxiv_poll yields its events" in warning.message


# The forms Loopy's authoring reference (loopy_cli/docs_md/authoring.md) and its workflow
# loader accept: a bare `tz=`, `window`/`latency` budgets, `limits:`, an OpenCode harness.
DOCS_REGISTRY = """\
defaults:
  agent: {harness: {runtime: claude-code, model: claude-sonnet-4-6}}
agents:
  Sweeper: {harness: {runtime: opencode, model: claude-sonnet-4-6}}
  Scout: {harness: {runtime: opencode, model: gpt-5}}
limits:
  cascade_spend: {usd: 20}
"""
TICK = """\
---
on: cron("1,15 * * * *", tz=Europe/Berlin)
agent: Sweeper
budget: {spend: {usd: 4}, window: 7}
---
Tick {{ event.scheduled_at }}.
"""


def test_the_documented_forms_compile_with_what_they_do_here(tmp_path: Path) -> None:
    report = compile_playbooks(_project(tmp_path, DOCS_REGISTRY, {"sweep/tick.md": TICK}))

    assert report.ok, [str(e) for e in report.errors]
    trigger = report.playbooks[0].trigger
    assert (trigger.cron, trigger.timezone) == ("1,15 * * * *", "Europe/Berlin")
    models = {c.name: c.spec.model_policy.default for c in report.agent_configs}
    assert models == {"sweeper": "anthropic/claude-sonnet-4-6", "scout": "openai/gpt-5"}
    said = {(Path(w.file).name, w.line, w.field): w.message for w in report.warnings}
    assert "not enforced here" in said[("registry.yml", 6, "limits")]
    assert "has no effect here" in said[("tick.md", 4, "budget.window")]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('on: Github.PullRequestOpened(repo="octocat/Hello-World")', "a trigger filtered by fields"),
        ("emits: [Done, Other]", "a step emits one event here"),
    ],
)
def test_loopy_forms_with_no_meaning_here_are_refused_with_the_fix(
    tmp_path: Path, line: str, message: str
) -> None:
    registry = AGENTS + "events:\n  Done: {note: str}\n  Other: {note: str}\n"
    on = "" if line.startswith("on:") else "on: Done\n"
    step = f"---\n{on}{line}\nagent: Scribe\noutput: {{note: str}}\n---\nx\n"
    report = compile_playbooks(_project(tmp_path, registry, {"w/s.md": step}))

    assert [(e.line, e.message.startswith(message)) for e in report.errors] == [(2 + bool(on), True)]


# Loopy's tests/fixtures/incidents: resolve/review.md reads `{{ fix.pr_url }}`, and no fix.md is there.
def test_a_reference_to_a_missing_step_lists_the_steps_there_are(tmp_path: Path) -> None:
    registry = AGENTS + "events:\n  WorkItem: {link: url}\n"
    steps = {
        "resolve/arbitrate.md": "---\non: WorkItem\nagent: Scribe\n---\n{{ event.link }}\n",
        "resolve/review.md": "---\nafter: arbitrate\nagent: Scribe\n---\nReview {{ fix.pr_url }}.\n",
    }
    report = compile_playbooks(_project(tmp_path, registry, steps))

    [error] = report.errors
    assert error.message == "{{ fix.pr_url }}: no step 'fix' in this playbook; its steps: arbitrate, review"
