"""Runs INSIDE the sandbox, before the command: opens the proxy ports on 127.0.0.1 in the
command's own (empty) network namespace, hands the listening sockets to the worker's proxies
over a Unix socket, then becomes the command.

    python -I -S bridge.py /run/openloop-egress/handoff.sock http=3128 socks=1080 -- /bin/sh -c LINE

The sockets go over as file descriptors (SCM_RIGHTS), so the worker accepts the command's
connections itself: nothing of this file stays in the data path or in the process tree, and
the command keeps the pid, the exit status and the signals bubblewrap gives it. A connection
the command makes before the worker's first accept waits in the listen backlog.

Only `_socket` is imported (not `socket`, nor `array`): their imports would delay every
command by several milliseconds. Standard library only, and nothing of this repository: the
file is bound into the sandbox alone and run by the worker's interpreter.
"""

from __future__ import annotations

import _socket
import os
import sys

BACKLOG = 512


def _listen(port: int) -> _socket.socket:
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", port))
    listener.listen(BACKLOG)
    return listener


def main(argv: list[str]) -> None:
    split = argv.index("--")
    (handoff, *pairs), command = argv[:split], argv[split + 1 :]
    names, listeners = [], []
    for pair in pairs:
        name, port = pair.split("=", 1)
        names.append(name)
        listeners.append(_listen(int(port)))
    fds = b"".join(listener.fileno().to_bytes(4, sys.byteorder) for listener in listeners)
    channel = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        channel.connect(handoff)
        channel.sendmsg([" ".join(names).encode()], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
    except OSError as error:
        sys.exit(f"openloop egress: could not hand the proxy ports to the worker ({handoff}): {error}")
    # The kernel holds the sockets in flight until the worker takes them; our copies can go.
    channel.close()
    for listener in listeners:
        listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
