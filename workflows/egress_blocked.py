"""What a sandbox's egress allowlist refused, in the words a person deciding reads: one line per
destination and command, `blocked: evil.example:443 from `pytest` ×3 (not in the allowlist)`.

`CommandEgress` is one command's report with the command's short name, as a coding tool's
result carries it; `BlockedTally` sums them over a coding task (workflow state: pure, bounded,
built only from activity results, so a replay rebuilds the same). Host names and command lines
come from what a sandboxed command or a model chose: they are cut to size and stripped of
anything a Slack card, a GitHub comment or a terminal would read as markup.
"""

from __future__ import annotations

import re
import shlex

from pydantic import BaseModel, ConfigDict, Field

from workflows.egress_report import EgressReport, readable_bytes

__all__ = [
    "BlockedAttempt",
    "BlockedTally",
    "CommandEgress",
    "blocked_line",
    "command_blocked_lines",
    "command_egress_lines",
    "live_blocked",
    "short_command",
]

MAX_KEPT = 20  # destinations (with their command) a task remembers by name
SHOWN = 8  # lines on an approval card; the rest are counted
LIVE_SHOWN = 3  # destinations in a running command's heartbeat
COMMAND_CHARS = 40
HOST_CHARS = 100

# Tools whose first argument says what they do (`pip install`, `npm test`).
_SUBCOMMANDS = frozenset(
    {"pip", "pip3", "npm", "npx", "pnpm", "yarn", "uv", "uvx", "poetry", "cargo", "go", "git", "make",
     "bundle", "gradle", "mvn", "dotnet", "docker", "apt-get", "composer", "deno", "bun", "hatch", "tox"}
)  # fmt: skip
_PYTHON = re.compile(r"^python[0-9.]*$")
_UNSAFE_HOST = re.compile(r"[^A-Za-z0-9._:\[\]%-]")
_UNSAFE_COMMAND = re.compile(r"[`\x00-\x1f\x7f]")  # shown in a code span: only a backtick ends it
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})


def _clean(text: str, unsafe: re.Pattern[str], limit: int) -> str:
    cleaned = unsafe.sub("?", text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def short_command(line: str) -> str:
    """The first word(s) of a command line: `pytest`, `pip install`, `python -m pytest`."""
    try:
        words = shlex.split(line)
    except ValueError:  # an unclosed quote: its words as they stand
        words = line.split()
    words = [word for word in words if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word)]
    if words and words[0] == "env":  # `env A=1 pytest`: the assignments are gone already
        words = words[1:]
    cut = next((i for i, word in enumerate(words) if word in _SEPARATORS), len(words))
    words = words[:cut]
    if not words:
        return _clean(line.strip()[:COMMAND_CHARS] or "?", _UNSAFE_COMMAND, COMMAND_CHARS)
    name = words[0].rsplit("/", 1)[-1] or words[0]
    if _PYTHON.match(name) and len(words) > 2 and words[1] == "-m":
        name = f"{name} -m {words[2]}"
    elif _PYTHON.match(name) and len(words) > 1 and words[1] == "-c":
        name = f"{name} -c"
    elif name in _SUBCOMMANDS and len(words) > 1 and not words[1].startswith("-"):
        name = f"{name} {words[1]}"
    return _clean(name, _UNSAFE_COMMAND, COMMAND_CHARS)


def blocked_line(host: str, port: int, command: str, count: int, reason: str) -> str:
    """`blocked: evil.example:443 from `pytest` ×3 (not in the allowlist)`; `command` short."""
    times = f" ×{count}" if count > 1 else ""
    source = f" from `{command}`" if command else ""
    why = f" ({reason})" if reason else ""
    return f"blocked: {_clean(host, _UNSAFE_HOST, HOST_CHARS)}:{port}{source}{times}{why}"


def command_blocked_lines(command: str, report: EgressReport | None) -> list[str]:
    """One command's blocked destinations, each naming the command (given whole or short)."""
    if report is None:
        return []
    short = short_command(command)
    lines = [blocked_line(b.host, b.port, short, b.count, b.reason) for b in report.blocked]
    if report.dropped:
        lines.append(f"… and {report.dropped} more destinations")
    return lines


def command_egress_lines(command: str, report: EgressReport | None) -> list[str]:
    """One command's blocked lines, then the bytes each allowed host moved: `allowed: pypi.org 1.2 MB`."""
    if report is None:
        return []
    allowed = [
        f"allowed: {_clean(a.host, _UNSAFE_HOST, HOST_CHARS)} {readable_bytes(a.bytes_in + a.bytes_out)}"
        for a in report.allowed
    ]
    return command_blocked_lines(command, report) + allowed


def live_blocked(report: EgressReport | None) -> list[str]:
    """A running command's blocked destinations so far, for its heartbeat: `evil.example:443 ×3`."""
    if report is None or not report.blocked:
        return []
    shown = [
        f"{_clean(b.host, _UNSAFE_HOST, HOST_CHARS)}:{b.port}" + (f" ×{b.count}" if b.count > 1 else "")
        for b in report.blocked[:LIVE_SHOWN]
    ]
    more = len(report.blocked) - LIVE_SHOWN + report.dropped
    return shown + ([f"{more} more"] if more > 0 else [])


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CommandEgress(_Frozen):
    """One sandboxed command's egress, with the command's short name."""

    command: str  # short: `pytest`, `pip install`
    report: EgressReport


class BlockedAttempt(_Frozen):
    host: str
    port: int
    command: str  # short
    reason: str
    count: int
    step: int  # the task's step that first tried it
    first_at: str = ""
    last_at: str = ""


class BlockedTally(_Frozen):
    """A coding task's blocked attempts, summed per destination and command."""

    attempts: list[BlockedAttempt] = Field(default_factory=list)
    unnamed: int = 0  # destinations past MAX_KEPT (or past a command's own report), not named

    def add(self, egress: CommandEgress, step: int) -> BlockedTally:
        """This tally with one command's blocked attempts added (itself when there were none)."""
        report = egress.report
        if not report.blocked and not report.dropped:
            return self
        attempts = list(self.attempts)
        unnamed = self.unnamed + report.dropped
        for blocked in report.blocked:
            key = (blocked.host, blocked.port, egress.command)
            at = next((i for i, a in enumerate(attempts) if (a.host, a.port, a.command) == key), None)
            if at is None:
                if len(attempts) >= MAX_KEPT:
                    unnamed += 1
                    continue
                attempts.append(
                    BlockedAttempt(
                        host=blocked.host,
                        port=blocked.port,
                        command=egress.command,
                        reason=blocked.reason,
                        count=blocked.count,
                        step=step,
                        first_at=blocked.first_at,
                        last_at=blocked.last_at,
                    )
                )
                continue
            seen = attempts[at]
            attempts[at] = seen.model_copy(
                update={
                    "count": seen.count + blocked.count,
                    "reason": blocked.reason,
                    "last_at": blocked.last_at or seen.last_at,
                }
            )
        return BlockedTally(attempts=attempts, unnamed=unnamed)

    def lines(self, limit: int = SHOWN) -> list[str]:
        """The most tried first; what does not fit is counted on a last line."""
        ranked = sorted(self.attempts, key=lambda a: (-a.count, a.host, a.port, a.command))
        lines = [blocked_line(a.host, a.port, a.command, a.count, a.reason) for a in ranked[:limit]]
        more = len(ranked) - limit if len(ranked) > limit else 0
        if more or self.unnamed:
            lines.append(f"… and {more + self.unnamed} more blocked destinations")
        return lines
