"""The worker's side of the bridge's handoff: the listening sockets the bridge opened inside
the sandbox's network namespace arrive over a Unix socket (SCM_RIGHTS), and the proxies then
accept the command's connections on them directly.

Only the first connection to the handoff socket is heard: the bridge makes it before the
command exists, and the socket is closed and unlinked as soon as it is accepted, so the command
cannot hand anything over itself. What arrives must be, for each name asked for once, a
listening TCP socket; anything else is closed unused and the handoff refused.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Collection
from contextlib import suppress
from pathlib import Path

__all__ = ["HandoffRefused", "handoff_listener", "receive_listeners"]

HANDOFF_TIMEOUT_S = 30.0  # the bridge sends as soon as it has connected
MAX_FDS = 8  # more than this is truncated by the kernel, which closes the rest


class HandoffRefused(Exception):
    """What the bridge handed over was not the listening sockets asked for."""


def handoff_listener(path: Path) -> socket.socket:
    """The Unix socket the bridge connects to: reachable by the sandbox's uid, one connection."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        os.chmod(path, 0o777)
        listener.listen(1)
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    return listener


async def receive_listeners(
    listener: socket.socket, path: Path, names: Collection[str]
) -> dict[str, socket.socket]:
    """The listening sockets of the first connection to `listener`, by name; closes and unlinks
    `listener` first, so no second connection is ever heard."""
    loop = asyncio.get_running_loop()
    try:
        channel, _ = await loop.sock_accept(listener)
    finally:
        listener.close()
        with suppress(FileNotFoundError):
            os.unlink(path)
    with channel:
        ready: asyncio.Future[None] = loop.create_future()
        loop.add_reader(channel.fileno(), _settle, ready)
        try:
            await asyncio.wait_for(ready, HANDOFF_TIMEOUT_S)
        finally:
            loop.remove_reader(channel.fileno())
        message, fds, flags, _ = socket.recv_fds(channel, 1024, MAX_FDS)
    sockets = [_listening_tcp(fd) for fd in fds]
    asked = message.decode("ascii", errors="replace").split()
    problem = ""
    if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
        problem = "the message was cut short"
    elif len(asked) != len(sockets) or sorted(asked) != sorted(names):
        problem = f"asked for {sorted(names)}, received {asked} with {len(fds)} sockets"
    elif any(sock is None for sock in sockets):
        problem = "a descriptor is not a listening TCP socket"
    if problem:
        for sock in sockets:
            if sock is not None:
                sock.close()
        raise HandoffRefused(problem)
    return {name: sock for name, sock in zip(asked, sockets, strict=True) if sock is not None}


def _settle(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


def _listening_tcp(fd: int) -> socket.socket | None:
    try:
        sock = socket.socket(fileno=fd)
    except OSError:  # not a socket at all (a pipe, a file)
        os.close(fd)
        return None
    try:
        listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    except OSError:
        listening = 0
    tcp = sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM
    if not (tcp and listening):
        sock.close()
        return None
    return sock
