"""The example playbooks as a newcomer runs them on the embedded stack, with no provider key: in a
fresh folder `openloop playbooks init`, then `openloop up` (which applies ./playbooks at
start); the nightly scan triggered from its schedule ends FAILED, honestly: the offline model
cannot count advisories and invents no `critical: 0`, and its run says it was answered offline;
a failed CI run delivered by a fake GitHub runs the triage chain (the offline model reads the
log, judges it real, fixes the demo project and proposes the draft pull request once approved),
whose emitted FixProposed runs fix-announce; `playbooks show` and `explain` tell each run's
story, step by step, each step marked as answered offline."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.fakes import serve_github
from tests.fakes.git_http import FakeGitHost
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_git import pull_requests
from tests.helpers import eventually
from tests.integration.up_env import OPENLOOP, start_up, stop

STEP_SECONDS = 240.0  # how long each step of the story may take


def openloop(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*OPENLOOP, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def runs(env: dict[str, str], cwd: Path, playbook: str) -> list[dict[str, Any]]:
    listed = openloop(env, cwd, "playbooks", "runs", "--playbook", playbook, "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    return list(json.loads(listed.stdout))


def finished(env: dict[str, str], cwd: Path, playbook: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        found = runs(env, cwd, playbook)
        return found[0] if found and found[0]["status"] != "RUNNING" else None

    return check


def test_the_example_playbooks_run_on_the_embedded_stack_with_the_offline_model(
    stack_env: dict[str, str],
    tmp_path: Path,
) -> None:
    git = FakeGitHost(tmp_path / "git", token=serve_github.TOKEN).start()
    github = FakeGitHub(token=serve_github.TOKEN).start()
    github.git_root = git.root
    bare = git.make_repo(serve_github.REPO, serve_github.DEMO)
    github.add_repo(serve_github.REPO)
    sha = subprocess.run(
        ["git", "rev-parse", "main"], cwd=bare, capture_output=True, text=True, check=True
    ).stdout.strip()
    run = github.add_failed_run(
        serve_github.REPO, "CI", "main", sha, {"tests": ("Run pytest", serve_github.FAILURE_LOG)}
    )
    env = {
        **stack_env,
        "GITHUB_API_URL": github.url,
        "GITHUB_GIT_URL": git.url,
        "GITHUB_TOKEN": serve_github.TOKEN,
        "GITHUB_WEBHOOK_SECRET": serve_github.SECRET,
    }
    project = tmp_path / "project"
    project.mkdir()
    made = openloop(env, project, "playbooks", "init")
    assert made.returncode == 0 and (project / "playbooks" / "ci-triage" / "propose.md").exists(), made.stdout
    log = tmp_path / "up.log"
    process = start_up(env, log, cwd=project)
    try:
        started = log.read_text()
        assert "applying the playbooks in ./playbooks" in started, started
        assert "stored  nightly-deps v1" in started and "schedule  nightly-deps created" in started, started

        triggered = openloop(env, project, "playbooks", "schedule", "trigger", "nightly-deps")
        assert triggered.returncode == 0, triggered.stdout + triggered.stderr
        nightly = eventually(
            finished(env, project, "nightly-deps"), f"the nightly run\n{log.read_text()}", STEP_SECONDS
        )
        assert nightly["status"] == "FAILED", nightly
        [scan] = nightly["steps"]
        assert scan["output"] == {} and "'critical' is missing" in scan["reason"], scan
        listed = openloop(env, project, "playbooks", "runs", "--playbook", "nightly-deps")
        assert "FAILED · on cron · 0/1 steps · 1 answered offline" in listed.stdout, listed.stdout
        shown = openloop(env, project, "playbooks", "show", nightly["run_id"]).stdout
        unknown = "(answered offline: the offline model cannot know critical, summary, issue_url)"
        assert unknown in shown, shown
        assert "answered offline" in shown.split("1. scan", 1)[1].splitlines()[0], shown

        body = json.dumps(serve_github.failed_run_payload(sha, run)).encode()
        signature = hmac.new(serve_github.SECRET.encode(), body, hashlib.sha256).hexdigest()
        delivered = httpx.post(
            f"http://{env['OPENLOOP_HTTP_ADDRESS']}/github/webhook",
            content=body,
            headers={
                "X-GitHub-Event": "workflow_run",
                "X-GitHub-Delivery": str(uuid.uuid4()),
                "X-Hub-Signature-256": f"sha256={signature}",
                "Content-Type": "application/json",
            },
            timeout=30,
        )
        assert delivered.status_code == 202, delivered.text
        [run_id] = delivered.json()["playbook_runs"]

        def waiting_for_approval() -> str | None:
            shown = openloop(env, project, "playbooks", "show", run_id)
            return shown.stdout if f"openloop approve {run_id}.propose" in shown.stdout else None

        waiting = eventually(
            waiting_for_approval, f"the propose step's approval\n{log.read_text()}", STEP_SECONDS
        )
        assert "status   RUNNING: step propose: waiting for" in waiting, waiting
        assert pull_requests(github, serve_github.REPO) == []  # nothing before the approval
        approved = openloop(env, project, "approve", f"{run_id}.propose")
        assert approved.returncode == 0, approved.stdout + approved.stderr

        triage = eventually(
            finished(env, project, "ci-triage"), f"the triage run\n{log.read_text()}", STEP_SECONDS
        )
        announce = eventually(finished(env, project, "fix-announce"), "the announcement run", STEP_SECONDS)
        explained = openloop(env, project, "explain", run_id)
    finally:
        assert stop(process) == 0, log.read_text()[-3000:]
        github.stop()
        git.stop()

    assert triage["status"] == "SUCCEEDED", triage
    investigate, propose = triage["steps"]
    assert investigate["output"] == {
        "verdict": "real", "notes": "FAILED tests/test_calc.py::test_mean - assert 2.5 == 2.0",
    }  # fmt: skip
    (pull,) = pull_requests(github, serve_github.REPO)
    assert pull["head"]["ref"] == f"openloop/{run_id}.propose"
    assert propose["output"]["pull_request_url"] == pull["html_url"]
    assert propose["output"]["repo"] == serve_github.REPO
    assert (
        propose["output"]["summary"]
        == f"Fixed tests/test_calc.py::test_mean. Draft pull request: {pull['html_url']}"
    )
    assert announce["status"] == "SUCCEEDED" and announce["steps"][0]["output"] == {"posted": False}
    assert announce["event"]["pull_request_url"] == pull["html_url"]

    story = explained.stdout
    assert explained.returncode == 0, story + explained.stderr
    assert story.startswith(f"{run_id}: SUCCEEDED"), story
    assert "Reason: 2 step(s) succeeded (answered offline: investigate, propose)" in story, story
    assert (
        story.index("1. investigate") < story.index(f"task {run_id}.investigate") < story.index("2. propose")
    )
    assert f"task {run_id}.propose · agent coder · SUCCESS" in story, story
    assert "github.create_pull_request approved by cli:local" in story, story
    assert "reason  emitted FixProposed" in story, story
