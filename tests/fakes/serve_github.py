"""A stand-in GitHub on this machine, to watch the coding agent go from a CI failure to a draft
pull request without a GitHub account: the fake REST API (issues, comments, Actions runs and
logs, Git data, pull requests) and git's smart HTTP, serving `acme/demo` (the demo project,
whose `test_mean` fails) with one failed CI run.

    python -m tests.fakes.serve_github              # serves, prints the variables for `openloop up`
    python -m tests.fakes.serve_github send-ci-failure   # posts the signed workflow_run webhook

The first command keeps running and prints what the agent does (comments, pull requests);
its state file (`--state`, default .openloop/fake-github.json) tells the second where to post.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.git_http import FakeGitHost
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_git import pull_requests

REPO = "acme/demo"
TOKEN = "ghp_fake_local_token"
SECRET = "fake-webhook-secret"
DEMO = Path(__file__).resolve().parents[2] / "config" / "loops" / "demo-project"
FAILURE_LOG = """\
tests/test_calc.py::test_mean FAILED
E       assert 2.5 == 2.0
FAILED tests/test_calc.py::test_mean - assert 2.5 == 2.0
1 failed, 1 passed in 0.02s
"""


def serve(state: Path, root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    git = FakeGitHost(root, token=TOKEN).start()
    github = FakeGitHub(token=TOKEN).start()
    github.git_root = git.root
    bare = git.make_repo(REPO, DEMO)
    github.add_repo(REPO)
    sha = subprocess.run(
        ["git", "rev-parse", "main"], cwd=bare, capture_output=True, text=True, check=True
    ).stdout.strip()
    run = github.add_failed_run(REPO, "CI", "main", sha, {"tests": ("Run pytest", FAILURE_LOG)})
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"sha": sha, "run": run}))
    print("Fake GitHub serving acme/demo with one failed CI run. In another terminal:\n")
    print(f"  export GITHUB_API_URL={github.url} GITHUB_GIT_URL={git.url}")
    print(f"  export GITHUB_TOKEN={TOKEN} GITHUB_WEBHOOK_SECRET={SECRET}")
    print("  .venv/bin/openloop up\n")
    print("then: .venv/bin/python -m tests.fakes.serve_github send-ci-failure\n", flush=True)
    seen: set[str] = set()
    try:
        while True:
            for line in _news(github, sha):
                if line not in seen:
                    seen.add(line)
                    print(line, flush=True)
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        github.stop()
        git.stop()


def _news(github: FakeGitHub, sha: str) -> list[str]:
    """What the agent did on the fake GitHub so far, one line each."""
    lines = [f"comment on commit {sha[:12]}: {c['body'][:400]}" for c in github.commit_comments(REPO, sha)]
    for issue in github.issues(REPO):
        for comment in github.comments(REPO, int(issue["number"])):
            lines.append(f"comment on #{issue['number']}: {comment['body'][:400]}")
    for pull in pull_requests(github, REPO):
        lines.append(f"draft pull request #{pull['number']}: {pull['title']} ({pull['head']['ref']})")
    return lines


def failed_run_payload(sha: str, run: dict[str, Any]) -> dict[str, Any]:
    return {
        "action": "completed",
        "repository": {"full_name": REPO},
        "sender": {"login": "alice"},
        "workflow_run": {
            **run,
            "head_repository": {"full_name": REPO},
            "actor": {"login": "alice"},
            "pull_requests": [],
            "head_sha": sha,
        },
    }


def send_ci_failure(state: Path, webhook: str) -> None:
    saved = json.loads(state.read_text())
    body = json.dumps(failed_run_payload(saved["sha"], saved["run"])).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    answer = httpx.post(
        webhook,
        content=body,
        headers={
            "X-GitHub-Event": "workflow_run",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": signature,
            "Content-Type": "application/json",
        },
        timeout=30,
    )
    print(answer.status_code, answer.text)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.serve_github")
    parser.add_argument("command", nargs="?", choices=["serve", "send-ci-failure"], default="serve")
    parser.add_argument("--state", type=Path, default=Path(".openloop/fake-github.json"))
    parser.add_argument("--webhook", default="http://127.0.0.1:8080/github/webhook")
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.state, args.state.parent / "fake-github-repos")
    else:
        send_ci_failure(args.state, args.webhook)


if __name__ == "__main__":
    main()
