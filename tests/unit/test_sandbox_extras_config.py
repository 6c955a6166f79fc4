"""`sandbox.env_file` and `sandbox.repos` as a loop file and an agent file write them: where a
relative path is read from, what each repository's folder becomes, and what bad ones are told."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.loader import AgentConfigError, parse_agent
from config.loop import parse_loop
from workflows.loop_types import ExtraRepo, RepoSource

LOOP = """\
apiVersion: openloop.ai/v1alpha1
kind: Loop
metadata: {name: demo}
spec:
  mission: {objective: pass}
  repo: {path: ./project}
  commands: {verify: python -m pytest -q}
  sandbox:
    env_file: secrets/dev.env
    repos:
      - acme/shared-schemas
      - {github: acme/tools, base: v2, into: vendor/tools}
      - {path: ../fixtures, into: testdata/fixtures}
"""
CODER = Path(__file__).resolve().parents[2] / "config" / "agents" / "coder.yaml"


def _loop_problems(text: str) -> list[str]:
    with pytest.raises(AgentConfigError) as caught:
        parse_loop(text, "loop.yaml", "/work/loops")
    return [str(problem) for problem in caught.value.problems]


def test_a_loop_file_s_paths_are_read_from_its_folder_and_each_repo_gets_a_folder() -> None:
    sandbox = parse_loop(LOOP, "loop.yaml", "/work/loops").sandbox
    assert sandbox.env_file == "/work/loops/secrets/dev.env"
    assert sandbox.repos == [
        ExtraRepo(github="acme/shared-schemas", into="shared-schemas"),
        ExtraRepo(github="acme/tools", base="v2", into="vendor/tools"),
        ExtraRepo(path="/work/fixtures", into="testdata/fixtures"),
    ]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            "{github: acme/tools, into: ../outside}",
            "'../outside' must name a folder inside the workspace, e.g. vendor/name (no `.`, `..` or `//`)",
        ),
        (
            "{github: acme/tools, into: /abs}",
            "'/abs' must be relative to the workspace's root, e.g. vendor/name",
        ),
        (
            "{github: acme/tools, into: .git/x}",
            "'.git/x' would be inside the repository's .git; choose another folder",
        ),
        (
            "{github: acme/tools, path: /x}",
            "give exactly one of `github: owner/name` or `path: /a/local/checkout`",
        ),
        ("not a repo", "'not a repo' is not a repository; write owner/name"),
    ],
)
def test_a_bad_repository_entry_is_told_at_its_line(entry: str, problem: str) -> None:
    text = LOOP.replace("      - acme/shared-schemas\n", f"      - {entry}\n")
    problems = _loop_problems(text)
    assert len(problems) == 1 and problems[0].startswith("loop.yaml:11: spec.sandbox.repos[0]")
    assert problems[0].endswith(problem)


def test_two_repositories_cannot_share_a_folder() -> None:
    text = LOOP.replace("{path: ../fixtures, into: testdata/fixtures}", "{path: ../fixtures, into: vendor}")
    assert _loop_problems(text) == [
        "loop.yaml:13: spec.sandbox.repos[2].into: 'vendor' overlaps 'vendor/tools'; "
        "give each repository a folder of its own"
    ]


def test_an_agent_s_paths_must_be_absolute() -> None:
    sandbox = "sandbox: {provider: bubblewrap, network: false}"
    text = CODER.read_text()
    assert sandbox in text
    good = text.replace(sandbox, "sandbox: {env_file: /etc/openloop/coder.env, repos: [acme/tools]}")
    coding = parse_agent(good, "coder.yaml").spec.coding
    assert coding.sandbox.env_file == "/etc/openloop/coder.env"
    setup = coding.setup(RepoSource(github="acme/demo"))  # what a coding task's workspace gets
    assert setup.sandbox.repos == [ExtraRepo(github="acme/tools", into="tools")]
    bad = text.replace(sandbox, "sandbox: {env_file: secrets/dev.env, repos: [{path: ./x}]}")
    with pytest.raises(AgentConfigError) as caught:
        parse_agent(bad, "coder.yaml")
    where = "write an absolute path on the loop worker (an agent is not read from its file's folder)"
    assert [problem.message for problem in caught.value.problems] == [
        f"'secrets/dev.env': {where}",
        f"'./x': {where}",
    ]
    assert {problem.field for problem in caught.value.problems} == {
        "spec.coding.sandbox.env_file",
        "spec.coding.sandbox.repos[0].path",
    }
