"""What a sandboxed command's egress proxies saw: the attempts they refused and the traffic
they let through, summed per destination. Pure data returned by the command's activity (the
workflow never measures anything itself) and the words reports show for it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AllowedEgress", "BlockedEgress", "EgressReport", "egress_lines", "readable_bytes"]

MAX_DESTINATIONS = 50  # per list in one report: a command trying thousands of hosts stays small


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BlockedEgress(_Frozen):
    host: str
    port: int
    reason: str  # e.g. "not in the allowlist"
    count: int = 1
    first_at: str = ""  # ISO time of the first attempt (UTC)
    last_at: str = ""


class AllowedEgress(_Frozen):
    host: str
    port: int
    connections: int = 0
    bytes_out: int = 0  # from the command
    bytes_in: int = 0  # to the command


class EgressReport(_Frozen):
    allowlist: list[str] = Field(default_factory=list)
    blocked: list[BlockedEgress] = Field(default_factory=list)
    allowed: list[AllowedEgress] = Field(default_factory=list)
    dropped: int = 0  # destinations past MAX_DESTINATIONS, counted but not named


def readable_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{count} B"  # not reached


def egress_lines(report: EgressReport | None, *, allowed: bool = True) -> list[str]:
    """`blocked: evil.example:443 ×3 (not in the allowlist)` and `allowed: pypi.org 1.2 MB`."""
    if report is None:
        return []
    lines = [
        f"blocked: {b.host}:{b.port}" + (f" ×{b.count}" if b.count > 1 else "") + f" ({b.reason})"
        for b in report.blocked
    ]
    if allowed:
        lines += [f"allowed: {a.host} {readable_bytes(a.bytes_in + a.bytes_out)}" for a in report.allowed]
    if report.dropped:
        lines.append(f"… and {report.dropped} more destinations")
    return lines
