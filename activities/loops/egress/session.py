"""One sandboxed command's egress: its HTTP and SOCKS5 proxies, started before the command
and stopped after it, and what the sandbox needs to reach them.

The proxies listen on Unix sockets in a folder of their own outside the workspace, bound
read-only into the sandbox at `INSIDE_DIR`; the command keeps its empty network namespace,
where a copy of `bridge.py` beside the sockets (run by the worker's own interpreter, which
the sandbox can already run) opens 127.0.0.1:3128 and :1080 and hands the listening sockets
to the session over `handoff.sock` (`handoff`): the proxies then accept the command's
connections there themselves, with no forwarder in between. The command sees the usual proxy
variables pointing there, and nothing else leaves its namespace.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from activities.loops.egress.allowlist import Allowlist, Resolver
from activities.loops.egress.endpoint import Endpoint
from activities.loops.egress.handoff import HandoffRefused, handoff_listener, receive_listeners
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
BACKLOG = 512

Handler = Callable[[Gate, Endpoint], Awaitable[None]]
PROXIES: dict[str, Handler] = {"http": serve_http, "socks": serve_socks}


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
    _handoff: socket.socket | None = None

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
        loop = asyncio.get_running_loop()
        try:
            for name, serve in PROXIES.items():
                path = self.folder / f"{name}.sock"
                server = await loop.create_unix_server(self._handler(serve), path=str(path))
                os.chmod(path, 0o777)
                self._servers.append(server)
            handoff = self.folder / "handoff.sock"
            self._handoff = handoff_listener(handoff)
            self._track(asyncio.create_task(self._take_ports(self._handoff, handoff)))
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
        for server in self._servers:  # again: the handoff may have added one meanwhile
            server.close()
        if self._handoff is not None:  # never taken: the command did not get that far
            self._handoff.close()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    async def _take_ports(self, listener: socket.socket, path: Path) -> None:
        """Serve each proxy on the listening socket the bridge opened for it in the sandbox."""
        try:
            listeners = await receive_listeners(listener, path, PROXIES)
        except (HandoffRefused, OSError, TimeoutError) as error:
            # The command's connections to its proxy ports are then refused; this says why.
            self.gate.block("127.0.0.1", 0, f"the sandbox's proxy ports were not handed over: {error}")
            return
        loop = asyncio.get_running_loop()
        try:
            for name, sock in listeners.items():
                serve = self._handler(PROXIES[name])
                self._servers.append(await loop.create_server(serve, sock=sock, backlog=BACKLOG))
        except BaseException:  # stopped meanwhile: the sockets must not outlive the session
            for sock in listeners.values():
                sock.close()
            raise

    def _track(self, task: asyncio.Task[None]) -> None:
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    def _handler(self, serve: Handler) -> Callable[[], Endpoint]:
        def accepted(client: Endpoint) -> None:
            self._track(asyncio.create_task(self._guarded(serve, client)))

        return lambda: Endpoint(on_made=accepted)

    async def _guarded(self, serve: Handler, client: Endpoint) -> None:
        try:
            await serve(self.gate, client)
        except (OSError, asyncio.IncompleteReadError):
            pass  # the command hung up: its side of the story is in its own output
        finally:
            with suppress(RuntimeError):  # the loop may be closing
                client.close()

    def mount(self) -> EgressMount:
        assert self.folder is not None, "enter the session first"
        http, socks = f"http://127.0.0.1:{HTTP_PORT}", f"socks5h://127.0.0.1:{SOCKS_PORT}"
        env = {"HTTP_PROXY": http, "HTTPS_PROXY": http, "http_proxy": http, "https_proxy": http}
        env |= {"ALL_PROXY": socks, "all_proxy": socks, "NO_PROXY": "", "no_proxy": ""}
        python = str(Path(sys.executable).resolve())
        prefix = [
            python, "-I", "-S", INSIDE_BRIDGE,
            f"{INSIDE_DIR}/handoff.sock", f"http={HTTP_PORT}", f"socks={SOCKS_PORT}", "--",
        ]  # fmt: skip
        return EgressMount([(str(self.folder), INSIDE_DIR)], env, prefix)

    def report(self) -> EgressReport:
        return self.gate.report()
