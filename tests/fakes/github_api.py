"""A local stand-in for GitHub's REST API, for tests.

A real HTTP server on 127.0.0.1 (in its own thread) that speaks GitHub's wire format: token
or App JWT auth, JSON bodies, `page`/`per_page` pagination, `since` filters, 404/422 error
bodies, rate-limit headers. PyGithub talks to it through `base_url`. It keeps repositories,
issues (and pull requests, which share numbers), comments, commit comments, workflow runs,
jobs and job logs in memory; job logs answer with a 302 to a "blob" URL that honours Range,
or with plain text. Git data (blobs, trees, commits, refs) and pull requests live in real
bare repositories under `git_root` (`tests.fakes.github_git`).

Faults, for the next N requests matching a method and path pattern: an HTTP status (500,
429 or 403 with Retry-After), or "accept then hang": the request takes effect, and the
answer comes only after `hang_seconds`, past the client's timeout.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import jwt


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    times: int
    status: int = 500
    retry_after: int | None = None
    hang_seconds: float = 0.0
    message: str = "Server Error"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any = None
    status: int = 0


@dataclass
class _Repo:
    full_name: str
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    commit_comments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    jobs: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)  # tests.fakes.github_git


class FakeGitHub:
    def __init__(self, token: str = "ghp_test", login: str = "openloop-bot"):
        self.tokens = {token}
        self.login = login
        self.requests: list[Request] = []
        self.reactions: list[tuple[str, str]] = []
        self.logs: dict[int, str] = {}
        self.log_redirect = True
        self.app_public_key: str | None = None
        self.app_id: str | None = None
        self.installation_id = 4242
        self.token_ttl_seconds = 3600
        self.issued_tokens: list[str] = []
        # Where FakeGitHost keeps its bare repositories: the Git data and pulls API use them.
        self.git_root: Path | None = None
        self._repos: dict[str, _Repo] = {}
        self._faults: list[Fault] = []
        self._ids = iter(range(1000, 10**9))
        self._lock = threading.RLock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # Lifecycle and set-up ------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeGitHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add_repo(self, full_name: str) -> None:
        with self._lock:
            self._repos.setdefault(full_name.lower(), _Repo(full_name))

    def _repo(self, owner: str, name: str) -> _Repo | None:
        return self._repos.get(f"{owner}/{name}".lower())

    def _user(self, login: str | None = None) -> dict[str, Any]:
        login = login or self.login
        return {
            "login": login,
            "id": abs(hash(login)) % 10**6,
            "type": "Bot" if login.endswith("[bot]") else "User",
        }

    def add_issue(
        self,
        repo: str,
        title: str,
        body: str = "",
        *,
        pull_request: bool = False,
        user: str = "alice",
        state: str = "open",
    ) -> dict[str, Any]:
        with self._lock:
            r = self._repos[repo.lower()]
            number = len(r.issues) + 1
            kind = "pull" if pull_request else "issues"
            issue = {
                "id": next(self._ids),
                "node_id": f"I_{number}",
                "number": number,
                "title": title,
                "body": body,
                "state": state,
                "user": self._user(user),
                "labels": [],
                "comments": 0,
                "created_at": _now(),
                "updated_at": _now(),
                "closed_at": None,
                "author_association": "MEMBER",
                "url": f"{self.url}/repos/{r.full_name}/issues/{number}",
                "html_url": f"https://github.test/{r.full_name}/{kind}/{number}",
            }
            if pull_request:
                issue["pull_request"] = {"url": f"{self.url}/repos/{r.full_name}/pulls/{number}"}
            r.issues[number] = issue
            return issue

    def add_comment(self, repo: str, number: int, body: str, user: str = "alice") -> dict[str, Any]:
        with self._lock:
            r = self._repos[repo.lower()]
            comment = {
                "id": next(self._ids),
                "body": body,
                "user": self._user(user),
                "created_at": _now(),
                "updated_at": _now(),
                "author_association": "MEMBER",
                "html_url": f"https://github.test/{r.full_name}/issues/{number}#comment",
            }
            r.comments.setdefault(number, []).append(comment)
            r.issues[number]["comments"] = len(r.comments[number])
            return comment

    def add_failed_run(
        self, repo: str, name: str, branch: str, sha: str, jobs: dict[str, tuple[str, str]]
    ) -> dict[str, Any]:
        """A failed run; `jobs` maps job name -> (failed step name, log text)."""
        with self._lock:
            r = self._repos[repo.lower()]
            run_id = next(self._ids)
            run = {
                "id": run_id,
                "name": name,
                "run_number": len(r.runs) + 1,
                "head_branch": branch,
                "head_sha": sha,
                "event": "push",
                "status": "completed",
                "conclusion": "failure",
                "run_attempt": 1,
                "created_at": _now(),
                "updated_at": _now(),
                "html_url": f"https://github.test/{r.full_name}/actions/runs/{run_id}",
            }
            r.runs.insert(0, run)
            r.jobs[run_id] = []
            for job_name, (step, log) in jobs.items():
                job_id = next(self._ids)
                self.logs[job_id] = log
                r.jobs[run_id].append(
                    {
                        "id": job_id,
                        "run_id": run_id,
                        "name": job_name,
                        "status": "completed",
                        "conclusion": "failure",
                        "head_sha": sha,
                        "started_at": _now(),
                        "steps": [
                            {
                                "name": "Set up job",
                                "status": "completed",
                                "conclusion": "success",
                                "number": 1,
                            },
                            {"name": step, "status": "completed", "conclusion": "failure", "number": 2},
                        ],
                    }
                )
            return run

    def issues(self, repo: str) -> list[dict[str, Any]]:
        with self._lock:
            return [i for i in self._repos[repo.lower()].issues.values() if "pull_request" not in i]

    def comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._repos[repo.lower()].comments.get(number, []))

    def commit_comments(self, repo: str, sha: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._repos[repo.lower()].commit_comments.get(sha, []))

    def count(self, method: str, pattern: str) -> int:
        return sum(1 for r in self.requests if r.method == method and re.fullmatch(pattern, r.path))

    # Faults --------------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        pattern: str,
        status: int = 500,
        times: int = 1,
        retry_after: int | None = None,
        message: str = "Server Error",
    ) -> None:
        with self._lock:
            self._faults.append(Fault(method, re.compile(pattern), times, status, retry_after, 0.0, message))

    def hang_after_accept(self, method: str, pattern: str, seconds: float, times: int = 1) -> None:
        with self._lock:
            self._faults.append(Fault(method, re.compile(pattern), times, 0, None, seconds))

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.times > 0 and fault.method == method and fault.pattern.fullmatch(path):
                    fault.times -= 1
                    return fault
        return None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        from tests.fakes import github_git  # noqa: F401  (registers the Git data and pulls routes)
        from tests.fakes.github_routes import make_handler

        return make_handler(self)

    # Auth ----------------------------------------------------------------------------------

    def authorized(self, header: str) -> bool:
        scheme, _, value = header.partition(" ")
        return scheme.lower() in ("token", "bearer") and value in self.tokens

    def app_jwt_ok(self, header: str) -> bool:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not self.app_public_key:
            return False
        try:
            claims = jwt.decode(value, self.app_public_key, algorithms=["RS256"])
        except jwt.PyJWTError:
            return False
        return str(claims.get("iss")) == self.app_id

    def issue_installation_token(self) -> dict[str, Any]:
        with self._lock:
            token = f"ghs_{len(self.issued_tokens) + 1:04d}"
            self.issued_tokens.append(token)
            self.tokens.add(token)
        expires = datetime.fromtimestamp(time.time() + self.token_ttl_seconds, UTC)
        return {"token": token, "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def query_of(path: str) -> tuple[str, dict[str, str]]:
    parsed = urlparse(path)
    return parsed.path, {k: v[-1] for k, v in parse_qs(parsed.query).items()}
