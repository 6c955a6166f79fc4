"""Runs INSIDE the sandbox, before the command: listens on 127.0.0.1 in the command's own
(empty) network namespace and forwards each connection to a proxy's Unix socket, then becomes
the command.

    python -I -S bridge.py 3128=/run/openloop-egress/http.sock 1080=/run/... -- /bin/sh -c LINE

It binds first (so the command can connect from its first instruction), forks the forwarder,
and execs the command in the original process, so the command keeps the pid, the exit status
and the signals bubblewrap gives it. The forwarder asks the kernel to kill it when that process
ends: bubblewrap's init waits for every process in the sandbox, so a forwarder left behind
would hold the sandbox open. Standard library only, and nothing of this repository: the file
is bound into the sandbox alone and run by the worker's interpreter.
"""

from __future__ import annotations

import os
import signal
import socket
import sys

PR_SET_PDEATHSIG = 1
CHUNK = 64 * 1024


def _forward_forever(listeners: list[tuple[socket.socket, str]]) -> None:
    """The forwarder, in the forked child. asyncio and ctypes are imported here, not above:
    their import would delay the command by tens of milliseconds."""
    import asyncio

    async def copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(CHUNK):
                writer.write(chunk)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except OSError:
            writer.close()

    async def forward(path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            proxy_reader, proxy_writer = await asyncio.open_unix_connection(path)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(copy(reader, proxy_writer), copy(proxy_reader, writer))
        finally:
            writer.close()
            proxy_writer.close()

    async def serve() -> None:
        for listener, path in listeners:
            await asyncio.start_server(lambda r, w, p=path: forward(p, r, w), sock=listener)  # type: ignore[misc]
        await asyncio.Event().wait()

    asyncio.run(serve())


def _die_with(parent: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the command ended before the request took hold
        os._exit(0)


def main(argv: list[str]) -> None:
    split = argv.index("--")
    pairs, command = argv[:split], argv[split + 1 :]
    listeners = []
    for pair in pairs:
        port, path = pair.split("=", 1)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(128)
        listeners.append((listener, path))
    parent = os.getpid()
    if os.fork() == 0:
        try:
            _die_with(parent)
            os.setsid()  # out of the command's process group: its Ctrl-C is not ours
            _forward_forever(listeners)
        finally:
            os._exit(0)
    for listener, _ in listeners:
        listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
