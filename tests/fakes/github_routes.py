"""The routes of the fake GitHub REST API (`tests.fakes.github_api.FakeGitHub`).

Each route takes the fake, the path's groups, the query and the JSON body, and returns
(status, headers, body); bodies are JSON unless they are bytes (logs).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from tests.fakes.github_api import Request, _now, dumps, query_of

if TYPE_CHECKING:
    from tests.fakes.github_api import FakeGitHub

Reply = tuple[int, dict[str, str], Any]
Route = Callable[["FakeGitHub", tuple[str, ...], dict[str, str], Any], Reply]
_ROUTES: list[tuple[str, re.Pattern[str], Route]] = []
_REPO = r"/repos/([^/]+)/([^/]+)"


def route(method: str, pattern: str) -> Callable[[Route], Route]:
    def add(fn: Route) -> Route:
        _ROUTES.append((method, re.compile(pattern), fn))
        return fn

    return add


def _missing() -> Reply:
    return 404, {}, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}


def _invalid(field: str, code: str = "missing_field") -> Reply:
    return (
        422,
        {},
        {"message": "Validation Failed", "errors": [{"resource": "Issue", "field": field, "code": code}]},
    )


def _page(items: list[Any], query: dict[str, str]) -> list[Any]:
    per_page = min(int(query.get("per_page", 30)), 100)
    page = int(query.get("page", 1))
    return items[(page - 1) * per_page : page * per_page]


def _since(items: list[dict[str, Any]], query: dict[str, str]) -> list[dict[str, Any]]:
    since = query.get("since")
    return [i for i in items if not since or i["updated_at"] >= since]


@route("GET", _REPO)
def get_repo(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    r = gh._repo(*g[:2])
    if r is None:
        return _missing()
    return (
        200,
        {},
        {
            "id": abs(hash(r.full_name)) % 10**6,
            "full_name": r.full_name,
            "name": g[1],
            "owner": gh._user(g[0]),
            "url": f"{gh.url}/repos/{r.full_name}",
        },
    )


@route("POST", _REPO + r"/issues")
def create_issue(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    if gh._repo(*g[:2]) is None:
        return _missing()
    if not isinstance(body, dict) or not body.get("title"):
        return _invalid("title")
    issue = gh.add_issue(f"{g[0]}/{g[1]}", str(body["title"]), str(body.get("body") or ""), user=gh.login)
    issue["labels"] = [{"name": name} for name in body.get("labels") or []]
    return 201, {}, issue


@route("GET", _REPO + r"/issues")
def list_issues(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    r = gh._repo(*g[:2])
    if r is None:
        return _missing()
    state = q.get("state", "open")
    items = [i for i in r.issues.values() if state == "all" or i["state"] == state]
    items = sorted(_since(items, q), key=lambda i: i["number"], reverse=q.get("direction", "desc") == "desc")
    return 200, {}, _page(items, q)


@route("GET", _REPO + r"/issues/(\d+)")
def get_issue(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    r = gh._repo(*g[:2])
    issue = r.issues.get(int(g[2])) if r else None
    return (200, {}, issue) if issue else _missing()


@route("PATCH", _REPO + r"/issues/(\d+)")
def edit_issue(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    r = gh._repo(*g[:2])
    issue = r.issues.get(int(g[2])) if r else None
    if issue is None:
        return _missing()
    issue.update({k: v for k, v in (body or {}).items() if k in ("title", "body", "state")})
    issue["updated_at"] = _now()
    return 200, {}, issue


@route("GET", _REPO + r"/issues/(\d+)/comments")
def list_comments(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    r = gh._repo(*g[:2])
    if r is None or int(g[2]) not in r.issues:
        return _missing()
    return 200, {}, _page(_since(r.comments.get(int(g[2]), []), q), q)


@route("POST", _REPO + r"/issues/(\d+)/comments")
def create_comment(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    r = gh._repo(*g[:2])
    if r is None or int(g[2]) not in r.issues:
        return _missing()
    if not isinstance(body, dict) or not body.get("body"):
        return _invalid("body")
    return 201, {}, gh.add_comment(r.full_name, int(g[2]), str(body["body"]), user=gh.login)


def _find_comment(gh: FakeGitHub, g: tuple[str, ...], commit: bool) -> dict[str, Any] | None:
    r = gh._repo(*g[:2])
    if r is None:
        return None
    groups: list[list[dict[str, Any]]] = list((r.commit_comments if commit else r.comments).values())
    return next((c for cs in groups for c in cs if c["id"] == int(g[2])), None)


@route("GET", _REPO + r"/(issues/comments|comments)/(\d+)")
def get_any_comment(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _find_comment(gh, (g[0], g[1], g[3]), commit=g[2] == "comments")
    return (200, {}, found) if found else _missing()


@route("PATCH", _REPO + r"/(issues/comments|comments)/(\d+)")
def edit_any_comment(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    found = _find_comment(gh, (g[0], g[1], g[3]), commit=g[2] == "comments")
    if found is None:
        return _missing()
    found.update(body=str((body or {}).get("body") or ""), updated_at=_now())
    return 200, {}, found


@route("POST", _REPO + r"/(issues/comments|pulls/comments)/(\d+)/reactions")
def react(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    gh.reactions.append((f"{g[2]}/{g[3]}", str((body or {}).get("content"))))
    return 201, {}, {"id": len(gh.reactions), "content": (body or {}).get("content"), "user": gh._user()}


@route("GET", _REPO + r"/commits/([0-9a-f]+)/comments")
def list_commit_comments(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    r = gh._repo(*g[:2])
    return (200, {}, _page(r.commit_comments.get(g[2], []), q)) if r else _missing()


@route("POST", _REPO + r"/commits/([0-9a-f]+)/comments")
def create_commit_comment(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    r = gh._repo(*g[:2])
    if r is None:
        return _missing()
    comment = {
        "id": next(gh._ids),
        "body": str((body or {}).get("body") or ""),
        "user": gh._user(),
        "commit_id": g[2],
        "created_at": _now(),
        "updated_at": _now(),
        "html_url": f"https://github.test/{r.full_name}/commit/{g[2]}#comment",
    }
    r.commit_comments.setdefault(g[2], []).append(comment)
    return 201, {}, comment


@route("GET", r"/search/issues")
def search(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    terms = re.findall(r'"[^"]+"|\S+', q.get("q", ""))
    repos = [t[5:].lower() for t in terms if t.startswith("repo:")]
    words = [t.strip('"').lower() for t in terms if ":" not in t]
    flags = {t[3:] for t in terms if t.startswith("is:")}
    items = []
    for key, r in gh._repos.items():
        if repos and key not in repos:
            continue
        for issue in r.issues.values():
            text = f"{issue['title']} {issue['body']}".lower()
            is_pr = "pull_request" in issue
            if ("issue" in flags and is_pr) or ("pr" in flags and not is_pr):
                continue
            if ({"open", "closed"} & flags) and issue["state"] not in flags:
                continue
            if all(word in text for word in words):
                items.append(issue)
    return 200, {}, {"total_count": len(items), "incomplete_results": False, "items": _page(items, q)}


@route("GET", _REPO + r"/actions/runs")
def list_runs(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    r = gh._repo(*g[:2])
    if r is None:
        return _missing()
    runs = [
        run
        for run in r.runs
        if (not q.get("branch") or run["head_branch"] == q["branch"])
        and (not q.get("status") or q["status"] in (run["status"], run["conclusion"]))
    ]
    return 200, {}, {"total_count": len(runs), "workflow_runs": _page(runs, q)}


@route("GET", _REPO + r"/actions/runs/(\d+)/jobs")
def list_jobs(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    r = gh._repo(*g[:2])
    jobs = r.jobs.get(int(g[2])) if r else None
    return (200, {}, {"total_count": len(jobs), "jobs": _page(jobs, q)}) if jobs is not None else _missing()


@route("GET", _REPO + r"/actions/jobs/(\d+)/logs")
def job_logs(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    job_id = int(g[2])
    if job_id not in gh.logs:
        return _missing()
    if gh.log_redirect:
        return 302, {"Location": f"{gh.url}/_blobs/logs/{job_id}?sig=signed"}, b""
    return 200, {"Content-Type": "text/plain"}, gh.logs[job_id].encode()


@route("GET", _REPO + r"/installation")
def repo_installation(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    return 200, {}, {"id": gh.installation_id, "app_id": gh.app_id, "account": gh._user(g[0])}


@route("POST", r"/app/installations/(\d+)/access_tokens")
def access_token(gh: FakeGitHub, g: tuple[str, ...], q: dict[str, str], body: Any) -> Reply:
    if int(g[0]) != gh.installation_id:
        return _missing()
    return 201, {}, gh.issue_installation_token()


_APP_JWT_ROUTES = (repo_installation, access_token)


def make_handler(gh: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, headers: dict[str, str], payload: Any) -> None:
            data = payload if isinstance(payload, bytes) else dumps(payload)
            self.send_response(status)
            self.send_header("Content-Type", headers.pop("Content-Type", "application/json; charset=utf-8"))
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-RateLimit-Limit", "5000")
            self.send_header("X-RateLimit-Remaining", "4999")
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _blob(self, path: str) -> None:
            job_id = int(path.rsplit("/", 1)[1])
            data = gh.logs.get(job_id, "").encode()
            gh.requests[-1].status = 200
            match = re.fullmatch(r"bytes=-(\d+)", self.headers.get("Range", ""))
            if match and data:
                part = data[-int(match.group(1)) :]
                start = len(data) - len(part)
                self._send(
                    206,
                    {
                        "Content-Type": "text/plain",
                        "Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}",
                    },
                    part,
                )
            else:
                self._send(200, {"Content-Type": "text/plain"}, data)

        def _dispatch(self, method: str) -> None:
            path, query = query_of(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            request = Request(method, path, query, {k: v for k, v in self.headers.items()}, body)
            gh.requests.append(request)
            if path.startswith("/_blobs/logs/"):
                return self._blob(path)
            fault = gh._take_fault(method, path)
            if fault and not fault.hang_seconds:
                headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
                request.status = fault.status
                return self._send(fault.status, headers, {"message": fault.message})
            for verb, pattern, fn in _ROUTES:
                match = pattern.fullmatch(path)
                if verb != method or not match:
                    continue
                auth = self.headers.get("Authorization", "")
                allowed = gh.app_jwt_ok(auth) if fn in _APP_JWT_ROUTES else gh.authorized(auth)
                if not allowed:
                    request.status = 401
                    return self._send(401, {}, {"message": "Bad credentials"})
                with gh._lock:
                    status, headers, payload = fn(gh, match.groups(), query, body)
                request.status = status
                if fault:  # accepted; the answer comes after the client gave up
                    time.sleep(fault.hang_seconds)
                try:
                    return self._send(status, dict(headers), payload)
                except (BrokenPipeError, ConnectionResetError):
                    return None
            request.status = 404
            self._send(404, {}, {"message": "Not Found"})

        def do_GET(self) -> None:  # noqa: N802
            self._dispatch("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._dispatch("POST")

        def do_PATCH(self) -> None:  # noqa: N802
            self._dispatch("PATCH")

    return Handler
