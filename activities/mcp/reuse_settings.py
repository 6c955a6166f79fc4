"""How long a worker reuses MCP sessions and tool listings, from its environment.

OPENLOOP_MCP_LISTING_TTL_S   a server's tool listing is reused this long (60; 0: list every time)
OPENLOOP_MCP_SESSIONS_MAX    open sessions per worker process (32; the least recently used close;
                             0: none kept, a connection per request)
OPENLOOP_MCP_SESSION_IDLE_S  a session unused this long is closed (300)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

LISTING_TTL = "OPENLOOP_MCP_LISTING_TTL_S"
SESSIONS_MAX = "OPENLOOP_MCP_SESSIONS_MAX"
SESSION_IDLE = "OPENLOOP_MCP_SESSION_IDLE_S"


@dataclass(frozen=True)
class ReuseSettings:
    listing_ttl_seconds: float = 60.0
    max_sessions: int = 32
    session_idle_seconds: float = 300.0


def reuse_settings() -> ReuseSettings:
    """The settings from the environment; a bad value is an error naming it and the fix."""
    default = ReuseSettings()
    return ReuseSettings(
        listing_ttl_seconds=_number(LISTING_TTL, default.listing_ttl_seconds, "60 (0 lists on every call)"),
        max_sessions=int(_number(SESSIONS_MAX, default.max_sessions, "32 (0 keeps none)", whole=True)),
        session_idle_seconds=_number(SESSION_IDLE, default.session_idle_seconds, "300"),
    )


def _number(name: str, default: float, example: str, *, whole: bool = False) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = -1
    if value < 0 or not math.isfinite(value):
        kind = "a whole number" if whole else "a number of seconds"
        raise ValueError(
            f"the environment variable {name}={raw!r} is not {kind} of 0 or more: set it to e.g. {example}"
        )
    return value
