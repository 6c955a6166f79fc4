"""One sandboxed command's egress: its HTTP and SOCKS5 proxies, started before the command
and stopped after it, and what the sandbox needs to reach them.

The proxies listen on Unix sockets in a folder of their own outside the workspace, bound
read-only into the sandbox at `INSIDE_DIR`; the command keeps its empty network namespace,
where a copy of `bridge.py` beside the sockets (run by the worker's own interpreter, which
the sandbox can already run) listens on 127.0.0.1 and forwards to those sockets. The command sees
the usual proxy variables pointing there, and nothing else leaves its namespace.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from activities.loops.egress.allowlist import Allowlist, Resolver
from activities.loops.egress.ledger import Gate
from activities.loops.egress.proxy import serve_http
from activities.loops.egress.socks import serve_socks
from workflows.egress_report import EgressReport

__all__ = ["EgressMount", "EgressSession"]

INSIDE_DIR = "/run/openloop-egress"
INSIDE_BRIDGE = f"{INSIDE_DIR}/bridge.py"
HTTP_PORT = 3128  # inside the command's own network namespace: nothing else listens there
SOCKS_PORT = 1080
BRIDGE = Path(__file__).with_name("bridge.py")
STOP_GRACE_S = 1.0

Handler = Callable[[Gate, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass(frozen=True)
class EgressMount:
    """What `bwrap_argv` adds for a command with an allowlist."""

    binds: list[tuple[str, str]]  # read-only: (outside, inside)
    env: dict[str, str]
    prefix: list[str]  # runs before the command line, which it then becomes


@dataclass
class EgressSession:
    entries: list[str]
    resolver: Resolver | None = None
    folder: Path | None = None
    gate: Gate = field(init=False)
    _servers: list[asyncio.Server] = field(default_factory=list)
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.gate = Gate(Allowlist(self.entries, self.resolver))

    async def __aenter__(self) -> EgressSession:
        # /tmp rather than $TMPDIR: a socket's path must stay under the kernel's 108 bytes.
        self.folder = Path(tempfile.mkdtemp(prefix="openloop-egress-", dir="/tmp"))
        # A root worker's commands run as an unprivileged uid: they must reach the sockets.
        os.chmod(self.folder, 0o755)
        # A copy beside the sockets: the repository's own file may not be readable by that uid.
        shutil.copyfile(BRIDGE, self.folder / "bridge.py")
        os.chmod(self.folder / "bridge.py", 0o644)
        try:
            for name, serve in (("http.sock", serve_http), ("socks.sock", serve_socks)):
                path = self.folder / name
                server = await asyncio.start_unix_server(self._handler(serve), path=str(path))
                os.chmod(path, 0o777)
                self._servers.append(server)
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for server in self._servers:
            server.close()
        for handler in list(self._handlers):
            handler.cancel()
        if self._handlers:
            await asyncio.wait(list(self._handlers), timeout=STOP_GRACE_S)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _handler(self, serve: Handler) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], None]:
        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.create_task(self._guarded(serve, reader, writer))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

        return accept

    async def _guarded(
        self, serve: Handler, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            await serve(self.gate, reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass  # the command hung up: its side of the story is in its own output
        finally:
            with suppress(RuntimeError):  # the loop may be closing
                writer.close()

    def mount(self) -> EgressMount:
        assert self.folder is not None, "enter the session first"
        http, socks = f"http://127.0.0.1:{HTTP_PORT}", f"socks5h://127.0.0.1:{SOCKS_PORT}"
        env = {"HTTP_PROXY": http, "HTTPS_PROXY": http, "http_proxy": http, "https_proxy": http}
        env |= {"ALL_PROXY": socks, "all_proxy": socks, "NO_PROXY": "", "no_proxy": ""}
        python = str(Path(sys.executable).resolve())
        prefix = [
            python, "-I", "-S", INSIDE_BRIDGE,
            f"{HTTP_PORT}={INSIDE_DIR}/http.sock", f"{SOCKS_PORT}={INSIDE_DIR}/socks.sock", "--",
        ]  # fmt: skip
        return EgressMount([(str(self.folder), INSIDE_DIR)], env, prefix)

    def report(self) -> EgressReport:
        return self.gate.report()
