"""From a CI failure to a draft pull request on the embedded stack, as a newcomer runs it:
`openloop up` (offline model, the shipped `coder` agent bound to acme/demo), a fake GitHub
serving the demo project, a signed `workflow_run` webhook for the failed run, one
`openloop approve` — and exactly one draft pull request holding the fix."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import subprocess
import uuid
from pathlib import Path

import httpx

from tests.fakes import serve_github
from tests.fakes.git_http import FakeGitHost
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_git import pull_requests
from tests.helpers import eventually
from tests.integration.up_env import cli, start_up, stop

_APPROVE = re.compile(r"openloop approve (\S+?)`")
STEP_SECONDS = 180.0  # how long each step of the story may take


def test_a_ci_failure_ends_in_one_draft_pull_request_after_one_approval(
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
    log = tmp_path / "up.log"
    process = start_up(env, log)
    try:
        body = json.dumps(serve_github.failed_run_payload(sha, run)).encode()
        signature = hmac.new(serve_github.SECRET.encode(), body, hashlib.sha256).hexdigest()
        answer = httpx.post(
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
        assert answer.status_code in (200, 202), answer.text

        def approval_comment() -> str | None:
            for comment in github.commit_comments(serve_github.REPO, sha):
                found = _APPROVE.search(comment["body"])
                if found and "github.create_pull_request" in comment["body"]:
                    return found.group(1)
            return None

        task_id = str(eventually(approval_comment, f"the approval request\n{log.read_text()}", STEP_SECONDS))
        assert pull_requests(github, serve_github.REPO) == []  # nothing before the click
        approved = cli(env, "approve", task_id)
        assert approved.returncode == 0, approved.stdout + approved.stderr
        eventually(lambda: pull_requests(github, serve_github.REPO), "the draft pull request", STEP_SECONDS)

        def replied_with_link() -> bool:
            pull = pull_requests(github, serve_github.REPO)[0]
            return any(pull["html_url"] in c["body"] for c in github.commit_comments(serve_github.REPO, sha))

        eventually(replied_with_link, "the reply naming the pull request", STEP_SECONDS)
        (pull,) = pull_requests(github, serve_github.REPO)
        assert pull["draft"] is True and pull["head"]["ref"] == f"openloop/{task_id}"
        checkout = tmp_path / "pushed"
        url = f"{git.url}/{serve_github.REPO}.git".replace("://", f"://x:{serve_github.TOKEN}@", 1)
        branch = pull["head"]["ref"]
        subprocess.run(["git", "clone", "-q", "--branch", branch, url, str(checkout)], check=True)
        assert "/ len(values)" in (checkout / "calc.py").read_text()
    finally:
        assert stop(process) == 0, log.read_text()[-3000:]
        github.stop()
        git.stop()
