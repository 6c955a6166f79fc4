"""`sandbox.setup` as loop files and agents write it: what a good one becomes, what a bad one
is told (file, line, field, fix), that payloads written before it existed mean no setup, and
the words a person reads of how it went."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.coding import CodingSpec
from config.loader import AgentConfigError
from config.loop import parse_loop
from surfaces.cli.loop_doctor import Check, command_checks, setup_check
from surfaces.cli.loop_views import running_line
from workflows.loop_types import (
    AcquireRequest,
    LoopStatus,
    LoopView,
    RepoSource,
    Sandbox,
    Step,
    WorkspaceHandle,
)
from workflows.setup_types import SandboxSetup, SetupReport, setup_line

LOOP = """\
apiVersion: openloop.ai/v1alpha1
kind: Loop
metadata: {name: setup-demo}
spec:
  mission: {objective: Make the tests pass}
  repo: {github: acme/demo}
  commands:
    verify: .venv/bin/python -m pytest -q
  sandbox:
    network: false
    setup:
      commands:
        - python -m venv .venv
        - .venv/bin/pip install -e .
      network: [pypi.org, files.pythonhosted.org]
      env: {PIP_DISABLE_PIP_VERSION_CHECK: "1"}
"""


def test_a_setup_reads_as_commands_with_their_own_network() -> None:
    spec = parse_loop(LOOP, "loop.yaml", "/base")
    assert spec.sandbox.network is False
    assert spec.sandbox.setup == SandboxSetup(
        commands=["python -m venv .venv", ".venv/bin/pip install -e ."],
        network=["pypi.org", "files.pythonhosted.org"],
        env={"PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    one_line = LOOP.replace(
        "      commands:\n        - python -m venv .venv\n        - .venv/bin/pip install -e .\n",
        "      commands: npm ci\n",
    )
    one = parse_loop(one_line, "loop.yaml", "/base").sandbox.setup
    assert one is not None and one.commands == ["npm ci"] and one.cache is True


@pytest.mark.parametrize(
    ("line", "replacement", "said"),
    [
        (
            15,
            '      network: ["pypi.org/simple"]',
            "loop.yaml:15: spec.sandbox.setup.network[0]: 'pypi.org/simple' is a URL, not a host",
        ),
        (15, "      network: []", "loop.yaml:15: spec.sandbox.setup.network: an empty allowlist"),
        (16, '      env: {"bad name": x}', "'bad name' is not an environment variable name"),
        (13, '        - "  "', "loop.yaml:13: spec.sandbox.setup.commands[0]: an empty command"),
        (16, "      cache: maybe", "loop.yaml:16: spec.sandbox.setup.cache"),
    ],
)
def test_a_bad_setup_is_named_at_its_line(line: int, replacement: str, said: str) -> None:
    lines = LOOP.splitlines()
    lines[line - 1] = replacement
    with pytest.raises(AgentConfigError) as caught:
        parse_loop("\n".join(lines) + "\n", "loop.yaml", "/base")
    assert said in str(caught.value), str(caught.value)


def test_an_allowlist_for_setup_needs_the_bubblewrap_provider() -> None:
    with pytest.raises(AgentConfigError) as caught:
        parse_loop(LOOP.replace("    network: false\n", "    provider: none\n"), "loop.yaml", "/base")
    assert "spec.sandbox.setup.network: an allowlist needs `provider: bubblewrap`" in str(caught.value)


def test_an_agents_coding_sandbox_takes_the_same_setup() -> None:
    setup_fields = {"commands": ["npm ci"], "network": ["registry.npmjs.org"]}
    coding = CodingSpec.model_validate({"verify": "npm test", "sandbox": {"setup": setup_fields}})
    setup = coding.setup(RepoSource(github="acme/web")).sandbox.setup
    assert setup == SandboxSetup(commands=["npm ci"], network=["registry.npmjs.org"])


def test_payloads_from_before_setup_mean_no_setup() -> None:
    # As committed histories hold them: no `setup`, `sandbox` or `limits` keys.
    assert Sandbox.model_validate({"provider": "bubblewrap", "network": False}).setup is None
    request = AcquireRequest.model_validate({"loop_id": "loop-1", "repo": {"github": "acme/demo"}})
    assert request.sandbox.setup is None
    handle = WorkspaceHandle.model_validate(
        {"loop_id": "loop-1", "task_queue": "q", "worker": "w", "path": "/w/repo", "base_commit": "abc"}
    )
    assert handle.setup is None


def test_the_setup_line_says_what_happened() -> None:
    assert setup_line(SetupReport(passed=True, reused=True, duration_s=0.42)) == (
        "setup reused from this worker's cache in 0.4 s"
    )
    ran = SetupReport(passed=True, duration_s=38.14, commands=2, cached="cached (41.2 MB)")
    assert setup_line(ran) == "setup passed in 38.1 s (2 command(s); cached (41.2 MB))"
    failed = SetupReport(passed=False, duration_s=3.0, reason="`npm ci` exited 1")
    assert setup_line(failed) == "setup failed after 3.0 s: `npm ci` exited 1"


def test_the_live_line_says_how_the_setup_went() -> None:
    view = LoopView(
        loop_id="loop-1", name="demo", status=LoopStatus.RUNNING, round=1, step=Step.VERIFY,
        worker="w1", verdicts=[], setup="setup reused from this worker's cache in 0.2 s",
    )  # fmt: skip
    line = running_line(view, None).plain
    assert line.startswith("round 1 · verify · on w1")
    assert line.endswith("setup reused from this worker's cache in 0.2 s")
    assert "setup" not in running_line(view.model_copy(update={"setup": ""}), None).plain


def test_doctor_checks_the_setups_programs_and_knows_what_setup_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative program is looked for from here too
    spec = parse_loop(LOOP, "loop.yaml", "/base")
    [verify] = command_checks(spec, None)
    assert verify.ok and verify.detail == ".venv/bin/python comes from setup"
    reach = "network only to pypi.org, files.pythonhosted.org"
    said = f"2 command(s), {reach}; cached on the worker per lockfiles"
    assert setup_check(spec) == Check("setup", True, said)
    unknown = LOOP.replace("- python -m venv .venv", "- no-such-installer ci")
    missing = setup_check(parse_loop(unknown, "loop.yaml", "/base"))
    assert missing == Check("setup", False, "'no-such-installer' is not on PATH or in the project")
    bare = parse_loop(LOOP.split("    setup:")[0], "loop.yaml", "/base")
    assert not command_checks(bare, None)[0].ok  # no setup: nothing makes .venv
