"""Whether a sandboxed command may reach `host:port`, decided by the worker's egress proxy.

The rule is the allowlist's (`config.egress`), applied to what the command asked for and to
what the name resolves to here, outside the sandbox:

- A name must match an entry by name; an IP literal only an entry with that literal. The
  address of an allowed name, asked for without the name, is refused.
- The proxy resolves the name itself and connects to exactly the addresses it checked, so a
  second lookup cannot answer differently (DNS rebinding).
- Every resolved address must be public, unless it is listed itself (`10.0.0.5:8443`) or the
  entry is `localhost` (loopback only): a listed name resolving to 127.0.0.1 or 10.x is refused.
- A name's addresses are remembered for `remember_s` (one command's session: a client's 200
  requests, or 10 connections opened at once, make one lookup); the checks above run on them
  at every request all the same.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from config.egress import HostRule, IPAddress, ip_literal, normal_host, parse_host_rule

__all__ = ["Allowlist", "Resolver", "Verdict", "is_public", "resolve"]

Resolver = Callable[[str, int], Awaitable[list[str]]]
RESOLVE_TIMEOUT_S = 10.0
REMEMBER_S = 30.0  # well under a registry's DNS TTLs, and most commands' whole run
NOT_LISTED = "not in the allowlist"


@dataclass(frozen=True)
class Verdict:
    host: str  # as compared: lower case, no brackets
    port: int
    addresses: tuple[IPAddress, ...] = ()  # what to connect to, when allowed
    reason: str = ""  # why not, when refused

    @property
    def allowed(self) -> bool:
        return not self.reason


async def resolve(host: str, port: int) -> list[str]:
    """The worker's own resolver (tests replace it to stand in for a rebinding DNS)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def is_public(address: IPAddress) -> bool:
    """Reachable on the internet: not private, loopback, link-local, multicast or reserved."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def _unmapped(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class Allowlist:
    def __init__(self, entries: list[str], resolver: Resolver | None = None, remember_s: float = REMEMBER_S):
        self.entries = list(entries)
        self.rules = [parse_host_rule(entry) for entry in entries]  # validated at load already
        self.resolver = resolver
        self.remember_s = remember_s
        self._resolved: dict[tuple[str, int], tuple[float, list[IPAddress]]] = {}
        self._asking: dict[tuple[str, int], asyncio.Future[list[IPAddress]]] = {}

    def _listed_address(self, address: IPAddress, port: int) -> bool:
        return any(
            rule.address is not None
            and _unmapped(rule.address) == _unmapped(address)
            and rule.allows_port(port)
            for rule in self.rules
        )

    async def check(self, asked: str, port: int) -> Verdict:
        host = normal_host(asked)
        if not 1 <= port <= 65535:
            return Verdict(host, port, reason=f"port {port} is out of range")
        literal = ip_literal(host)
        if literal is not None:
            if not any(
                rule.address is not None and _unmapped(rule.address) == _unmapped(literal)
                for rule in self.rules
            ):
                return Verdict(
                    host, port, reason=f"{NOT_LISTED}: an address is allowed only when listed itself"
                )
            if not self._listed_address(literal, port):
                return Verdict(host, port, reason=f"port {port} is not allowed for {host}")
            return Verdict(host, port, (_unmapped(literal),))
        named = [rule for rule in self.rules if rule.matches_name(host)]
        if not named:
            return Verdict(host, port, reason=NOT_LISTED)
        if not any(rule.allows_port(port) for rule in named):
            return Verdict(host, port, reason=f"port {port} is not allowed: {_ports(named)}")
        addresses = await self._resolve(host, port)
        if not addresses:
            return Verdict(host, port, reason="the name does not resolve")
        loopback_ok = any(rule.name == "localhost" and rule.allows_port(port) for rule in named)
        for address in addresses:
            if (
                is_public(address)
                or (loopback_ok and address.is_loopback)
                or self._listed_address(address, port)
            ):
                continue
            return Verdict(
                host, port, reason=f"resolves to {_unmapped(address)}, a private address that is not listed"
            )
        return Verdict(host, port, tuple(addresses))

    async def _resolve(self, host: str, port: int) -> list[IPAddress]:
        key = (host, port)
        remembered = self._resolved.get(key)
        if remembered is not None and time.monotonic() - remembered[0] < self.remember_s:
            return remembered[1]
        asking = self._asking.get(key)
        if asking is None:  # connections opened at once share one lookup
            asking = self._asking[key] = asyncio.ensure_future(self._look_up(host, port))
            asking.add_done_callback(lambda _: self._asking.pop(key, None))
        addresses = await asyncio.shield(asking)  # one caller giving up does not end it for all
        if addresses:  # a failure is asked again next time
            self._resolved[key] = (time.monotonic(), addresses)
        return addresses

    async def _look_up(self, host: str, port: int) -> list[IPAddress]:
        lookup = self.resolver or resolve
        try:
            found = await asyncio.wait_for(lookup(host, port), RESOLVE_TIMEOUT_S)
        except (OSError, TimeoutError, UnicodeError):
            return []
        addresses: list[IPAddress] = []
        for text in found:
            address = ip_literal(text.split("%", 1)[0])  # an IPv6 scope is not part of the address
            if address is not None and address not in addresses:
                addresses.append(address)
        return addresses


def _ports(rules: list[HostRule]) -> str:
    allowed = sorted(
        {rule.port for rule in rules if rule.port} | ({80, 443} if any(not r.port for r in rules) else set())
    )
    return "the allowlist gives this host port " + ", ".join(str(port) for port in allowed)
