"""The entries of an egress allowlist (`sandbox.network: [pypi.org, "*.github.com", ...]`):
what each may say and what it lets through. Pure (stdlib only): the loop file and agent
readers validate with it at load, the worker's egress proxy matches with it at run time.

An entry is a host, optionally with a port:

- `pypi.org` — that name exactly; `*.github.com` — any name below github.com (not
  github.com itself). Names are compared case-insensitively, without a trailing dot.
- `127.0.0.1:8080`, `[::1]:8443`, `10.0.0.5` — an IP address, allowed only when asked for
  by that literal, and the only way to allow a private or loopback address (besides
  `localhost`, whose loopback addresses its entry allows).
- No port: 80 and 443. With a port (`api.internal:8443`): exactly that port.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

__all__ = ["DEFAULT_PORTS", "HostRule", "IPAddress", "ip_literal", "normal_host", "parse_host_rule"]

DEFAULT_PORTS = (80, 443)
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_HINT = 'write a host name (pypi.org), a pattern ("*.github.com") or an address, with an optional :port'

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class HostRule:
    """One allowlist entry, parsed. Exactly one of `name`, `suffix`, `address` is set."""

    text: str  # as written, for reports
    name: str | None = None  # an exact name
    suffix: str | None = None  # "*.github.com" -> "github.com"
    address: IPAddress | None = None
    port: int | None = None  # None: 80 and 443

    def allows_port(self, port: int) -> bool:
        return port in DEFAULT_PORTS if self.port is None else port == self.port

    def matches_name(self, host: str) -> bool:
        if self.name is not None:
            return host == self.name
        return self.suffix is not None and host.endswith("." + self.suffix)


def normal_host(host: str) -> str:
    """The form names are compared in: lower case, no trailing dot, no IPv6 brackets."""
    host = host.strip().lower().rstrip(".")
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(normal_host(host))
    except ValueError:
        return None


def _split_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):  # [v6]:port
        close = entry.find("]")
        if close < 0:
            raise ValueError(f"{entry!r} opens '[' without closing it; {_HINT}")
        host, rest = entry[: close + 1], entry[close + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"{entry!r} has text after ']' that is not a :port; {_HINT}")
        return host, _port(entry, rest[1:]) if rest else None
    if entry.count(":") > 1:  # a bare IPv6 address: no port possible
        return entry, None
    host, colon, port = entry.partition(":")
    return host, _port(entry, port) if colon else None


def _port(entry: str, text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"{entry!r} has port {text!r}, which is not a number; e.g. api.internal:8443")
    port = int(text)
    if not 1 <= port <= 65535:
        raise ValueError(f"{entry!r} has port {port}, out of range: ports are 1 to 65535")
    return port


def parse_host_rule(entry: str) -> HostRule:
    """One entry, or ValueError saying what is wrong and how to write it."""
    text = entry.strip()
    if not text:
        raise ValueError(f"an empty entry allows nothing; {_HINT}")
    if "://" in text or "/" in text:
        host = text.split("://", 1)[-1].split("/", 1)[0]
        raise ValueError(f"{entry!r} is a URL, not a host; write the host alone: {host}")
    host, port = _split_port(text)
    literal = ip_literal(host)
    if literal is not None:
        return HostRule(entry, address=literal, port=port)
    host = normal_host(host)
    if host == "*" or host == "*.":
        raise ValueError(f"{entry!r} would allow every host; list the hosts, or use `network: true`")
    wildcard = host.startswith("*.")
    labels = (host[2:] if wildcard else host).split(".")
    if "*" in host[1:] or not all(_LABEL.match(label) for label in labels) or len(host) > 253:
        where = "only as the whole first label (*.example.com)" if "*" in host else "letters, digits and '-'"
        raise ValueError(f"{entry!r} is not a host name or pattern ({where}); {_HINT}")
    if labels[-1].isdigit():
        raise ValueError(f"{entry!r} looks like an address but is not a valid one; {_HINT}")
    if wildcard:
        return HostRule(entry, suffix=".".join(labels), port=port)
    return HostRule(entry, name=host, port=port)
