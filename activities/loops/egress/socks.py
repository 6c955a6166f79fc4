"""The SOCKS5 egress proxy a sandboxed command reaches over a Unix socket (RFC 1928): no
authentication, CONNECT only, destinations as a domain name (`socks5h://`: the proxy resolves
it) or an IPv4/IPv6 address, each checked by the command's `Gate` first. Standard library only."""

from __future__ import annotations

import asyncio
import ipaddress

from activities.loops.egress.endpoint import Endpoint
from activities.loops.egress.ledger import Gate, open_checked, relay

__all__ = ["serve_socks"]

NEGOTIATE_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 15.0
_NO_AUTH, _NO_METHOD = 0x00, 0xFF
_CONNECT = 0x01
_IPV4, _DOMAIN, _IPV6 = 0x01, 0x03, 0x04
# Reply codes
_OK, _REFUSED_BY_RULES, _UNREACHABLE, _CONNECTION_REFUSED = 0x00, 0x02, 0x04, 0x05
_COMMAND_UNSUPPORTED, _ADDRESS_UNSUPPORTED = 0x07, 0x08


def _reply(client: Endpoint, code: int) -> None:
    client.write(bytes([5, code, 0, _IPV4, 0, 0, 0, 0, 0, 0]))


async def _destination(client: Endpoint) -> tuple[int, str, int] | None:
    """The command and destination a client asks for, after agreeing on no authentication."""
    version, count = await client.read_exactly(2)
    methods = await client.read_exactly(count)
    if version != 5 or _NO_AUTH not in methods:
        client.write(bytes([5, _NO_METHOD]))
        return None
    client.write(bytes([5, _NO_AUTH]))
    version, command, _, kind = await client.read_exactly(4)
    if kind == _IPV4:
        host = str(ipaddress.IPv4Address(await client.read_exactly(4)))
    elif kind == _IPV6:
        host = str(ipaddress.IPv6Address(await client.read_exactly(16)))
    elif kind == _DOMAIN:
        length = (await client.read_exactly(1))[0]
        host = (await client.read_exactly(length)).decode("ascii", errors="replace")
    else:
        _reply(client, _ADDRESS_UNSUPPORTED)
        return None
    port = int.from_bytes(await client.read_exactly(2), "big")
    return command, host, port


async def serve_socks(gate: Gate, client: Endpoint) -> None:
    try:
        async with asyncio.timeout(NEGOTIATE_TIMEOUT_S):
            asked = await _destination(client)
    except (asyncio.IncompleteReadError, TimeoutError, ConnectionError, ValueError):
        asked = None
    if asked is None:
        client.close()
        return
    command, host, port = asked
    if command != _CONNECT:
        name = {0x02: "BIND", 0x03: "UDP ASSOCIATE"}.get(command, f"command {command}")
        gate.block(host, port, f"SOCKS {name} is not allowed: only CONNECT")
        _reply(client, _COMMAND_UNSUPPORTED)
        client.close()
        return
    verdict = await gate.check(host, port)
    if not verdict.allowed:
        _reply(client, _REFUSED_BY_RULES)
        client.close()
        return
    try:
        upstream = await open_checked(verdict, CONNECT_TIMEOUT_S)
    except ConnectionRefusedError:
        _reply(client, _CONNECTION_REFUSED)
        client.close()
        return
    except OSError:
        _reply(client, _UNREACHABLE)
        client.close()
        return
    _reply(client, _OK)
    await relay(client, upstream, gate.flow(verdict))
