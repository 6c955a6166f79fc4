"""Git's smart HTTP for tests: bare repositories under a folder, served by `git http-backend`.

A real HTTP server on 127.0.0.1 in its own thread; each request runs git's own CGI program,
so clients speak the real protocol. It asks for GitHub's credentials (Basic auth with any
user and the token as password) and refuses anything else with 401, like GitHub does.
`make_repo` creates a bare repository from a folder of files, one commit on `main`.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "HOME": "/nonexistent",
}


def _git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **_GIT_ENV})


class FakeGitHost:
    def __init__(self, root: Path, token: str = "test-token") -> None:
        self.root = root
        self.token = token
        self.requests: list[tuple[str, str, bool]] = []  # method, path, authorized
        self.delay_seconds = 0.0  # each answer waits this long: a slow or large clone
        root.mkdir(parents=True, exist_ok=True)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeGitHost:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def make_repo(self, full_name: str, files: Path) -> Path:
        """`owner/name` as a bare repository holding `files` in one commit on main."""
        work = self.root / "_work" / full_name
        shutil.copytree(files, work, ignore=shutil.ignore_patterns("__pycache__"))
        _git("init", "--quiet", "--initial-branch", "main", cwd=work)
        _git("add", "--all", cwd=work)
        _git("commit", "--quiet", "-m", "initial", cwd=work)
        bare = self.root / f"{full_name}.git"
        _git("clone", "--quiet", "--bare", str(work), str(bare))
        return bare

    def _authorized(self, header: str | None) -> bool:
        if not header or not header.startswith("Basic "):
            return False
        try:
            _, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except ValueError:
            return False
        return password == self.token

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        host = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _serve(self) -> None:
                parsed = urlparse(self.path)
                authorized = host._authorized(self.headers.get("Authorization"))
                host.requests.append((self.command, parsed.path, authorized))
                if not authorized:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "GIT_PROJECT_ROOT": str(host.root),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "PATH_INFO": parsed.path,
                    "QUERY_STRING": parsed.query,
                    "REQUEST_METHOD": self.command,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(length),
                    "REMOTE_USER": "x-access-token",
                    "REMOTE_ADDR": "127.0.0.1",
                    "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                }
                time.sleep(host.delay_seconds)
                done = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True)
                head, _, payload = done.stdout.partition(b"\r\n\r\n")
                status = 200
                headers: list[tuple[str, str]] = []
                for line in head.decode(errors="replace").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "status":
                        status = int(value.strip().split()[0])
                    elif name:
                        headers.append((name, value.strip()))
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = _serve
            do_POST = _serve

        return Handler
