"""What one command's egress proxies saw, and the two moves both proxies share.

`Gate` is what a proxy asks: the allowlist's verdict, with each refused attempt recorded (host,
port, reason, time) and each allowed destination's traffic counted, summed into the
`EgressReport` the command's outcome carries. `open_checked` connects only to the addresses
the allowlist checked; `relay` copies both ways, counting bytes as they pass.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime

from activities.loops.egress.allowlist import Allowlist, Verdict
from activities.loops.egress.endpoint import Endpoint, splice
from workflows.egress_report import MAX_DESTINATIONS, AllowedEgress, BlockedEgress, EgressReport

__all__ = ["Flow", "Gate", "open_checked", "relay"]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Flow:
    """Traffic to one allowed destination, over all its connections."""

    connections: int = 0
    bytes_out: int = 0
    bytes_in: int = 0


@dataclass
class _Blocked:
    count: int
    first_at: str
    last_at: str


@dataclass
class Gate:
    allowlist: Allowlist
    blocked: dict[tuple[str, int, str], _Blocked] = field(default_factory=dict)
    flows: dict[tuple[str, int], Flow] = field(default_factory=dict)

    async def check(self, host: str, port: int) -> Verdict:
        verdict = await self.allowlist.check(host, port)
        if not verdict.allowed:
            self.block(verdict.host, port, verdict.reason)
        return verdict

    def block(self, host: str, port: int, reason: str) -> None:
        now = _now()
        seen = self.blocked.setdefault((host, port, reason), _Blocked(0, now, now))
        seen.count, seen.last_at = seen.count + 1, now

    def flow(self, verdict: Verdict) -> Flow:
        flow = self.flows.setdefault((verdict.host, verdict.port), Flow())
        flow.connections += 1
        return flow

    def report(self) -> EgressReport:
        blocked = [
            BlockedEgress(
                host=host, port=port, reason=reason, count=b.count, first_at=b.first_at, last_at=b.last_at
            )
            for (host, port, reason), b in sorted(self.blocked.items(), key=lambda item: -item[1].count)
        ]
        allowed = [
            AllowedEgress(
                host=host, port=port, connections=f.connections, bytes_out=f.bytes_out, bytes_in=f.bytes_in
            )
            for (host, port), f in sorted(
                self.flows.items(), key=lambda item: -(item[1].bytes_in + item[1].bytes_out)
            )
        ]
        dropped = max(0, len(blocked) - MAX_DESTINATIONS) + max(0, len(allowed) - MAX_DESTINATIONS)
        return EgressReport(
            allowlist=self.allowlist.entries,
            blocked=blocked[:MAX_DESTINATIONS],
            allowed=allowed[:MAX_DESTINATIONS],
            dropped=dropped,
        )


async def relay(client: Endpoint, upstream: Endpoint, flow: Flow) -> None:
    """Copy both ways until both sides are done, counting the bytes as they pass."""

    def out(count: int) -> None:
        flow.bytes_out += count

    def back(count: int) -> None:
        flow.bytes_in += count

    splice(client, upstream, out, back)
    try:
        await asyncio.wait([client.closed, upstream.closed])
    finally:  # also when the session stops the connection
        client.close()
        upstream.close()


async def open_checked(verdict: Verdict, timeout_s: float) -> Endpoint:
    """A connection to one of the addresses the allowlist checked, never a fresh lookup."""
    loop = asyncio.get_running_loop()
    error = OSError(f"no address for {verdict.host}")
    for address in verdict.addresses:
        try:
            async with asyncio.timeout(timeout_s):
                _, upstream = await loop.create_connection(Endpoint, str(address), verdict.port)
            return upstream
        except OSError as failed:  # refused, unreachable, or timed out: the next address
            error = failed
    raise error
