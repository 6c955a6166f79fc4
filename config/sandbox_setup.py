"""`sandbox.setup`: what a workspace runs once when it is taken, before any loop command or
coding tool, with a network allowlist of its own. Declared here for loop files and agents'
`spec.coding.sandbox` alike (`config.coding.SandboxFields` holds it). Pydantic only.

    sandbox:
      network: false                      # the loop's commands: no network
      setup:
        commands:
          - python -m venv .venv
          - .venv/bin/pip install -e .
        network: [pypi.org, files.pythonhosted.org]   # setup only: the package registries
        env: {PIP_DISABLE_PIP_VERSION_CHECK: "1"}     # plain values; secrets come from env_from

What the commands leave in the workspace that git does not track (`.venv/`, `node_modules/`)
is cached on the loop worker per repository and lockfiles; `cache: false` runs them every time.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from config.fields import Strict, rule_error

__all__ = ["SetupFields"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SetupFields(Strict):
    commands: list[str] = Field(min_length=1)
    network: bool | list[str] = False
    env: dict[str, str] = Field(default_factory=dict)
    cache: bool = True

    @field_validator("commands", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("network", mode="before")
    @classmethod
    def _network_shape(cls, value: object) -> object:
        if isinstance(value, bool) or (isinstance(value, list) and all(isinstance(e, str) for e in value)):
            return value
        hosts = "[pypi.org, files.pythonhosted.org]"
        raise ValueError(f"{value!r}: write true, false or a list of hosts, e.g. {hosts}")

    @model_validator(mode="after")
    def _lines_and_names(self) -> SetupFields:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        for index, command in enumerate(self.commands):
            if not command.strip():
                problems.append((("commands", index), "an empty command: remove it or write a shell line"))
        for name in self.env:
            if not _ENV_NAME.match(name):
                problems.append((("env", name), f"{name!r} is not an environment variable name"))
        if problems:
            raise rule_error(problems)
        return self
