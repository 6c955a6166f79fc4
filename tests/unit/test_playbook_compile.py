"""Compiling playbooks: what a good folder becomes, and every refusal with its file, line, field."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.loader import example_agent, parse_agent
from config.playbooks import CompileReport, compile_playbooks
from surfaces.cli.playbooks import EXAMPLES, agent_facts
from workflows.playbook_types import FieldKind, TriggerKind

REGISTRY = """\
events:
  CIFailed:
    fields: {repo: str, branch: str, run_url: str}
    github: {event: workflow_run, conclusion: failure}
  Triaged:
    fields: {verdict: enum[flaky, real]}
agents:
  triager: dev-platform
defaults:
  budget: $0.50
"""
INVESTIGATE = """\
---
on: CIFailed
agent: triager
output: {verdict: enum[flaky, real], notes: str}
---
Find out why {{ event.repo }} failed on {{ event.branch }}.
"""
PROPOSE = """\
---
after: investigate
agent: coder
---
The verdict was {{ investigate.verdict }}: {{ steps.investigate.notes }}
"""
AGENTS = [example_agent("dev-platform"), example_agent("coder"), example_agent("minimal")]


def _folder(root: Path, files: dict[str, str | None]) -> Path:
    """A playbooks folder: the base CI triage chain with `files` written over (None removes)."""
    merged: dict[str, str | None] = {
        "registry.yaml": REGISTRY,
        "ci/investigate.md": INVESTIGATE,
        "ci/propose.md": PROPOSE,
    }
    merged.update(files)
    for name, text in merged.items():
        if text is not None:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
    return root


def _compile(tmp_path: Path, files: dict[str, str | None] | None = None) -> CompileReport:
    root = _folder(tmp_path / "playbooks", files or {})
    return compile_playbooks(root, {a.name for a in AGENTS}, agents=agent_facts(AGENTS))


def _errors(tmp_path: Path, files: dict[str, str | None]) -> list[str]:
    report = _compile(tmp_path, files)
    assert not report.ok
    return [str(p).replace(str(tmp_path / "playbooks") + "/", "") for p in report.errors]


def _one(errors: list[str], prefix: str, words: str) -> None:
    found = [e for e in errors if e.startswith(prefix) and words in e]
    assert found, f"no {prefix!r} error with {words!r} in:\n" + "\n".join(errors)


def test_the_shipped_examples_compile_clean_against_the_shipped_agents() -> None:
    report = compile_playbooks(EXAMPLES, {a.name for a in AGENTS}, agents=agent_facts(AGENTS))
    assert report.errors == [] and report.warnings == []
    by_name = {p.name: p for p in report.playbooks}
    assert set(by_name) == {"nightly-deps", "ci-triage", "fix-announce"}
    nightly = by_name["nightly-deps"]
    assert nightly.trigger.kind is TriggerKind.CRON
    assert (nightly.trigger.cron, nightly.trigger.timezone) == ("0 3 * * *", "Europe/Berlin")
    assert nightly.steps[0].approval == "required" and nightly.steps[0].agent == "dev-platform"
    triage = by_name["ci-triage"]
    assert [s.name for s in triage.steps] == ["investigate", "propose"]
    verdict = triage.step("investigate").output[0]
    assert (verdict.kind, verdict.choices) == (FieldKind.ENUM, ("flaky", "real"))
    assert triage.step("propose").agent == "coder" and triage.step("propose").budget_usd == 2.0
    assert triage.step("investigate").budget_usd == 0.5  # the registry's default
    assert report.events["FixProposed"].source == "playbook"
    again = compile_playbooks(EXAMPLES, {a.name for a in AGENTS}, agents=agent_facts(AGENTS))
    assert [p.content_hash for p in again.playbooks] == [p.content_hash for p in report.playbooks]


def test_a_changed_file_or_registry_entry_changes_the_content_hash(tmp_path: Path) -> None:
    first = _compile(tmp_path / "a").playbooks[0].content_hash
    prose = _compile(tmp_path / "b", {"ci/propose.md": PROPOSE + "Be brief.\n"}).playbooks[0].content_hash
    event = _compile(tmp_path / "c", {"registry.yaml": REGISTRY.replace("run_url: str", "run_url: str?")})
    assert len({first, prose, event.playbooks[0].content_hash}) == 3


def test_an_orphan_step_is_refused(tmp_path: Path) -> None:
    errors = _errors(tmp_path, {"ci/extra.md": "---\nagent: coder\n---\nHello\n"})
    _one(errors, "ci/extra.md:2: after:", "orphan step: it has neither `on:` nor `after:`")


def test_a_step_after_one_that_never_runs_is_an_orphan(tmp_path: Path) -> None:
    loose = "---\nagent: coder\n---\nx\n"
    after_loose = "---\nagent: coder\nafter: loose\n---\ny\n"
    errors = _errors(tmp_path, {"ci/loose.md": loose, "ci/tail.md": after_loose})
    _one(errors, "ci/tail.md:3: after:", "not reachable from the entry step 'investigate'")


def test_two_entry_steps_and_none_are_refused(tmp_path: Path) -> None:
    errors = _errors(
        tmp_path / "two", {"ci/propose.md": PROPOSE.replace("after: investigate", "on: CIFailed")}
    )
    _one(errors, "ci/propose.md:2: on:", "a second entry step (the entry is 'investigate'")
    errors = _errors(
        tmp_path / "none", {"ci/investigate.md": INVESTIGATE.replace("on: CIFailed", "after: propose")}
    )
    _one(errors, "ci/investigate.md:2: on:", "playbook 'ci' has no entry step; give exactly one step `on:")


def test_unknown_events_and_agents_name_the_line_and_the_closest(tmp_path: Path) -> None:
    errors = _errors(
        tmp_path,
        {
            "ci/investigate.md": INVESTIGATE.replace("on: CIFailed", "on: CIFail"),
            "ci/propose.md": PROPOSE.replace("agent: coder", "agent: codr") + "",
        },
    )
    _one(errors, "ci/investigate.md:2: on:", "unknown event 'CIFail'")
    _one(errors, "ci/propose.md:3: agent:", "unknown agent 'codr'; did you mean 'coder'?")
    emits = PROPOSE.replace("agent: coder", "agent: coder\nemits: Triagd")
    _one(
        _errors(tmp_path / "e", {"ci/propose.md": emits}), "ci/propose.md:4: emits:", "unknown event 'Triagd'"
    )
    alias = REGISTRY.replace("triager: dev-platform", "triager: dev-platfrom")
    _one(_errors(tmp_path / "a", {"registry.yaml": alias}), "registry.yaml:8: agents.triager:", "not applied")


def test_a_cycle_is_refused_with_its_path(tmp_path: Path) -> None:
    first = "---\nagent: coder\nafter: [investigate, second]\n---\nx\n"
    second = "---\nagent: coder\nafter: first\n---\ny\n"
    errors = _errors(tmp_path, {"ci/first.md": first, "ci/second.md": second})
    cycle = [e for e in errors if "a cycle:" in e]
    assert len(cycle) == 1, errors
    assert "first → second → first" in cycle[0] or "second → first → second" in cycle[0]
    assert cycle[0].startswith(("ci/first.md:3: after:", "ci/second.md:3: after:"))
    itself = _errors(
        tmp_path / "self", {"ci/propose.md": PROPOSE.replace("after: investigate", "after: propose")}
    )
    _one(itself, "ci/propose.md:2: after:", "a cycle: propose → propose")


def test_references_must_name_upstream_steps_and_declared_fields(tmp_path: Path) -> None:
    sibling = "---\nafter: investigate\nagent: coder\noutput: {plan: str}\n---\nplan\n"
    propose = PROPOSE + "\nSee {{ plan.plan }} and {{ investigate.verdit }} and {{ event.repository }}.\n"
    errors = _errors(tmp_path, {"ci/plan.md": sibling, "ci/propose.md": propose})
    _one(
        errors,
        "ci/propose.md:7: body:",
        "step 'plan' is not upstream of 'propose', so its output is not there yet; add `after: plan`",
    )
    _one(errors, "ci/propose.md:7: body:", "declares no output 'verdit'; did you mean 'verdict'?")
    _one(errors, "ci/propose.md:7: body:", "has no field 'repository'; its fields: repo: str")
    wrong = _errors(tmp_path / "w", {"ci/propose.md": PROPOSE + "{{ nothing }}\n"})
    _one(wrong, "ci/propose.md:6: body:", "{{ nothing }} is not a reference")


def test_cron_expressions_and_time_zones_are_checked(tmp_path: Path) -> None:
    def scan(on: str) -> dict[str, str | None]:
        return {
            "nightly/scan.md": f"---\non: {on}\nagent: coder\n---\nScan at {{{{ event.scheduled_at }}}}.\n"
        }

    assert _compile(tmp_path / "ok", scan('cron("0 3 * * *", tz="Europe/Berlin")')).ok
    _one(
        _errors(tmp_path / "e", scan('cron("0 25 * * *")')),
        "nightly/scan.md:2: on:",
        "'0 25 * * *' is not a cron",
    )
    _one(_errors(tmp_path / "f", scan('cron("0 3 * *")')), "nightly/scan.md:2: on:", "write five fields")
    _one(
        _errors(tmp_path / "t", scan('cron("0 3 * * *", tz="Mars/Olympus")')),
        "nightly/scan.md:2: on:",
        "time zone",
    )
    _one(_errors(tmp_path / "q", scan("cron(0 3 * * *)")), "nightly/scan.md:2: on:", "the expression quoted")


def test_a_write_without_an_approval_is_refused_unless_the_step_requires_one(tmp_path: Path) -> None:
    loose = parse_agent(
        "apiVersion: openloop.ai/v1alpha1\nkind: Agent\nmetadata: {name: loose}\nspec:\n  tools:\n"
        "    - {name: github.create_issue, permissions: ['issues:write']}\n"
        "    - {name: github.get_issue, permissions: ['issues:read']}\n"
    )
    agents = [*AGENTS, loose]
    step = "---\nafter: investigate\nagent: loose\n---\nfile it\n"
    root = _folder(tmp_path / "playbooks", {"ci/file.md": step})
    report = compile_playbooks(root, {a.name for a in agents}, agents=agent_facts(agents))
    errors = [str(p).replace(str(root) + "/", "") for p in report.errors]
    _one(errors, "ci/file.md:3: agent:", "may call github.create_issue, which write, without an approval")
    assert not any("get_issue" in e for e in errors)
    (root / "ci/file.md").write_text(step.replace("agent: loose", "agent: loose\napproval: required"))
    assert compile_playbooks(root, {a.name for a in agents}, agents=agent_facts(agents)).ok
    (root / "ci/file.md").write_text(step)
    unknown = compile_playbooks(root)  # no agents known: skipped, and said so
    assert unknown.ok and any("agents were not checked" in str(w) for w in unknown.warnings)


def test_a_step_without_a_budget_is_refused_when_the_registry_demands_one(tmp_path: Path) -> None:
    registry = REGISTRY.replace("  budget: $0.50\n", "  require_budget: true\n")
    budgeted = PROPOSE.replace("agent: coder", "agent: coder\nbudget: $1")
    errors = _errors(tmp_path, {"registry.yaml": registry, "ci/propose.md": budgeted})
    _one(errors, "ci/investigate.md:2: budget:", "no budget, and")
    assert not any(e.startswith("ci/propose.md") for e in errors)
    free = PROPOSE.replace("agent: coder", "agent: coder\nbudget: free")
    _one(_errors(tmp_path / "b", {"ci/propose.md": free}), "ci/propose.md:4: budget:", "write e.g. $0.50")


def test_unknown_keys_name_the_closest_valid_one(tmp_path: Path) -> None:
    errors = _errors(
        tmp_path,
        {
            "ci/propose.md": PROPOSE.replace("agent: coder", "agent: coder\nouptut: {a: str}"),
            "registry.yaml": REGISTRY.replace("defaults:", "defualts:\n  x: 1\ndefaults:").replace(
                "    github: {event", "    githb: {event"
            ),
        },
    )
    _one(errors, "ci/propose.md:4: ouptut:", "did you mean 'output'?")
    _one(errors, "registry.yaml:4: events.CIFailed.githb:", "did you mean 'github'?")
    _one(errors, "registry.yaml:9: defualts:", "did you mean 'defaults'?")


def test_typed_fields_and_emitted_events_are_checked(tmp_path: Path) -> None:
    registry = REGISTRY.replace("run_url: str}", "run_url: url, tags: list[sting], n: int?}")
    errors = _errors(tmp_path, {"registry.yaml": registry})
    _one(errors, "registry.yaml:3: events.CIFailed.fields.tags:", "unknown type 'list[sting]'")
    assert not [e for e in errors if "run_url" in e]  # Loopy's `url` is text
    emits = PROPOSE.replace(
        "agent: coder", "agent: coder\nemits: Triaged\noutput: {verdict: enum[pass, fail]}"
    )
    errors = _errors(tmp_path / "e", {"ci/propose.md": emits})
    _one(errors, "ci/propose.md:4: emits:", "verdict: enum[flaky, real] (the output says enum[pass, fail])")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_dags_compile_and_any_cycle_is_refused(data: st.DataObject) -> None:
    size = data.draw(st.integers(min_value=2, max_value=7))
    # Step i (i > 0) runs after one or more earlier steps: acyclic, everything reachable.
    after = {i: data.draw(st.sets(st.integers(0, i - 1), min_size=1)) for i in range(1, size)}
    cyclic = data.draw(st.booleans())
    if cyclic:  # a back edge: a step `late` runs after also waits for `late` (or itself)
        late = data.draw(st.integers(1, size - 1))
        upstream, frontier = {late}, [late]
        while frontier:
            parents = after.get(frontier.pop(), set()) - upstream
            upstream |= parents
            frontier += parents
        early = data.draw(st.sampled_from(sorted(upstream - {0})))
        after[early] = after[early] | {late}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "p").mkdir()
        (root / "p/s0.md").write_text('---\non: cron("*/5 * * * *")\nagent: coder\n---\nstart\n')
        for step, parents in after.items():
            names = ", ".join(f"s{p}" for p in sorted(parents))
            (root / f"p/s{step}.md").write_text(f"---\nafter: [{names}]\nagent: coder\n---\nstep {step}\n")
        report = compile_playbooks(root, {"coder"})
    if cyclic:
        assert not report.ok and any("a cycle:" in str(p) for p in report.errors)
        assert report.playbooks == []
    else:
        assert report.ok, report.errors
        order = [s.name for s in report.playbooks[0].steps]
        assert order[0] == "s0" and len(order) == size
        for step, parents in after.items():
            assert all(order.index(f"s{p}") < order.index(f"s{step}") for p in parents)


def test_event_sources_are_read_and_each_wrong_one_named(tmp_path: Path) -> None:
    registry = REGISTRY.replace(
        "agents:\n",
        (
            "  Deploy:\n    fields: {text: str}\n"
            "    slack: {message: {channel: C0DEVPLAT, pattern: '^deploy'}}\n"
            "  Asked:\n    slack: mention\n"
            "  Incident:\n    fields: {title: str}\n    webhook: {hook: sentry, secret_env: SENTRY_SECRET}\n"
        )
        + "agents:\n",
    )
    listeners = {
        f"on-{n.lower()}/go.md": f"---\non: {n}\nagent: coder\n---\ngo\n"
        for n in ("Deploy", "Asked", "Incident")
    }
    report = _compile(tmp_path, {"registry.yaml": registry, **listeners})
    assert report.ok, report.errors
    assert report.events["Deploy"].match == {"kind": "message", "channel": "C0DEVPLAT", "pattern": "^deploy"}
    assert report.events["Asked"].match == {"kind": "mention"}
    assert report.events["Incident"].match == {"hook": "sentry", "secret_env": "SENTRY_SECRET"}
    assert report.events["CIFailed"].match == {"event": "workflow_run", "conclusion": "failure"}
    broken = (
        registry.replace("pattern: '^deploy'", "pattern: '(deploy'")
        .replace("secret_env: SENTRY_SECRET", "secret: x")
        .replace("{event: workflow_run, conclusion: failure}", "{conclusion: failure}")
        .replace("slack: mention", "slack: {reaction: {}}")
    )
    errors = _errors(tmp_path / "b", {"registry.yaml": broken, **listeners})
    _one(errors, "registry.yaml:4: events.CIFailed.github:", "name the GitHub webhook event")
    _one(errors, "registry.yaml:9: events.Deploy.slack.message.pattern:", "not a regular expression")
    _one(errors, "registry.yaml:11: events.Asked.slack.reaction:", "reaction needs `name:`")
    _one(errors, "registry.yaml:14: events.Incident.webhook.secret:", "did you mean 'secret_env'?")
    _one(errors, "registry.yaml:14: events.Incident.webhook.secret_env:", "the HMAC secret")


def test_warnings_do_not_fail_the_compile(tmp_path: Path) -> None:
    registry = REGISTRY.replace("agents:\n", "  Unused:\n    fields: {x: int}\nagents:\n")
    report = _compile(tmp_path, {"registry.yaml": registry})
    assert report.ok and len(report.playbooks) == 1
    warnings = [str(w).replace(str(tmp_path / "playbooks") + "/", "") for w in report.warnings]
    _one(warnings, "registry.yaml:7: events.Unused:", "nobody produces Unused")
    _one(warnings, "registry.yaml:7: events.Unused:", "no playbook starts on Unused")
    _one(warnings, "registry.yaml:5: events.Triaged:", "nobody produces Triaged")
