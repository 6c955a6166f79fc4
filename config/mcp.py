"""MCP servers an agent may use: how to reach each, and which of its tools are allowed.

    mcp_servers:
      - name: linear                     # the tools' prefix: linear.create_issue
        transport: streamable-http
        url: https://mcp.linear.app/mcp
        headers_from_env: {Authorization: LINEAR_MCP_AUTH}   # or "Bearer ${LINEAR_TOKEN}"
        headers: {X-Readonly: "true"}        # sent as written: never a secret
        allow: [list_issues, create_issue]   # omitted: nothing is allowed
        writes: [create_issue]               # which allowed tools have side effects

Secrets are named by environment variable, never written inline: the config is stored,
shown and carried in every task's history. A `headers_from_env` value is a variable's name
(its value is the header) or text with `${NAME}` in it (`Bearer ${GITHUB_TOKEN}`). Pydantic
only.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from config.fields import Duration, ProblemPath, Strict, parse_duration, rule_error

TRANSPORTS = ("stdio", "streamable-http")
_SERVER_NAME = re.compile(r"^[a-z0-9]([a-z0-9_-]{0,30}[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# An MCP tool name, or a glob over such names.
_TOOL_PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]-][A-Za-z0-9_.*?\[\]!-]*$")
_SECRET_QUERY = re.compile(r"(?i)(token|key|secret|password|auth)=")
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Headers that carry credentials: their value must come from the environment.
_SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie")


def header_variables(value: str) -> list[str]:
    """The environment variables a `headers_from_env` value reads: its name, or each `${NAME}`."""
    return [value] if _ENV_NAME.match(value) else _PLACEHOLDER.findall(value)


def header_value(value: str, lookup: Callable[[str], str]) -> str:
    """The header a `headers_from_env` value stands for, each variable read through `lookup`."""
    if _ENV_NAME.match(value):
        return lookup(value)
    return _PLACEHOLDER.sub(lambda match: lookup(match.group(1)), value)


class McpServer(Strict):
    name: str = Field(description="Lowercase letters, digits, - and _: the prefix of its tools")
    transport: str = Field(description="stdio or streamable-http")
    url: str | None = None
    command: list[str] | None = None
    headers_from_env: dict[str, str] = Field(
        default={}, description="HTTP header -> the environment variable holding its value"
    )
    headers: dict[str, str] = Field(default={}, description="HTTP headers sent as written (never a secret)")
    env_from: list[str] = Field(default=[], description="Environment variables passed to a stdio server")
    allow: list[str] = Field(default=[], description="Tool names or globs this agent may call")
    writes: list[str] = Field(default=[], description="Which allowed tools have side effects")
    timeout: Duration = "30s"
    required: bool = Field(default=False, description="A task fails when the server is down at its start")

    @field_validator("name")
    @classmethod
    def _prefix(cls, name: str) -> str:
        if not _SERVER_NAME.match(name):
            raise ValueError(
                f"{name!r} must be 1-32 lowercase letters, digits, - or _ (it prefixes the tools' names)"
            )
        return name

    @model_validator(mode="after")
    def _reachable_allowed_and_secret_free(self) -> McpServer:
        problems: list[tuple[ProblemPath, str]] = []
        if self.transport not in TRANSPORTS:
            problems.append(
                (("transport",), f"unknown transport {self.transport!r}; use one of: {', '.join(TRANSPORTS)}")
            )
        if self.transport == "streamable-http":
            problems += _url_problems(self.url)
            if self.command:
                problems.append(
                    (("command",), "a streamable-http server has a url, not a command; remove it")
                )
        if self.transport == "stdio":
            if not self.command:
                problems.append(
                    (("command",), "a stdio server needs `command`, e.g. [python, -m, my_server]")
                )
            if self.url:
                problems.append((("url",), "a stdio server has a command, not a url; remove it"))
        for header, variable in self.headers_from_env.items():
            if not header_variables(variable):
                problems.append(
                    (
                        ("headers_from_env", header),
                        "give the name of an environment variable holding the value, or text such "
                        "as 'Bearer ${TOKEN}', never the value itself (secrets must not be written "
                        "in the config)",
                    )
                )
        for header in self.headers:
            if header.lower() in _SECRET_HEADERS:
                problems.append(
                    (
                        ("headers", header),
                        f"{header} carries a credential: name its environment variable in "
                        f"headers_from_env instead, e.g. {{{header}: 'Bearer ${{TOKEN}}'}}",
                    )
                )
            elif header.lower() in (h.lower() for h in self.headers_from_env):
                problems.append((("headers", header), f"{header} is also in headers_from_env; set it once"))
            elif self.transport == "stdio":
                problems.append((("headers", header), "a stdio server takes no HTTP headers; remove it"))
        for index, variable in enumerate(self.env_from):
            if not _ENV_NAME.match(variable):
                problems.append((("env_from", index), f"{variable!r} is not an environment variable name"))
        for index, pattern in enumerate(self.allow):
            if pattern.startswith(f"{self.name}."):
                problems.append(
                    (
                        (("allow", index)),
                        f"{pattern!r} can match no tool: write it without the {self.name}. prefix",
                    )
                )
            elif not _TOOL_PATTERN.match(pattern):
                problems.append(
                    (
                        ("allow", index),
                        f"{pattern!r} can match no tool: write a tool name or a glob without the "
                        f"server prefix, e.g. create_issue or read_*",
                    )
                )
        for index, pattern in enumerate(self.writes):
            if not any(patterns_overlap(pattern, allowed) for allowed in self.allow):
                problems.append(
                    (("writes", index), f"{pattern!r} names no allowed tool; add it to allow or remove it")
                )
        if problems:
            raise rule_error(problems)
        return self

    @property
    def timeout_seconds(self) -> float:
        return parse_duration(self.timeout)

    def allows(self, tool: str) -> bool:
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.allow)

    def is_write(self, tool: str) -> bool:
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.writes)


def _url_problems(url: str | None) -> list[tuple[ProblemPath, str]]:
    if not url:
        return [(("url",), "a streamable-http server needs `url`, e.g. http://127.0.0.1:8000/mcp")]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return [(("url",), f"{url!r} is not an http(s) URL")]
    if parts.password or _SECRET_QUERY.search(parts.query):
        return [(("url",), "the url holds a secret; pass it with headers_from_env instead")]
    return []


def patterns_overlap(first: str, second: str) -> bool:
    """Whether two tool-name globs can name the same tool (a close, cheap check)."""
    return fnmatch.fnmatchcase(first, second) or fnmatch.fnmatchcase(second, first)


McpTransport = Literal["stdio", "streamable-http"]
