"""How an agent's coding tasks run (`spec.coding`): the project's test command, the limits of
every command in the workspace and its sandbox. A loop file's `limits` and `sandbox` read the
same way; the sandbox fields are declared here, once, for both. Pydantic only.

    coding:
      verify: python -m pytest -q
      limits: {command_timeout: 5m, memory: 1Gi}
      sandbox: {provider: bubblewrap, network: false, env_from: [PIP_INDEX_URL]}

`network` is true (the worker's network), false (none) or an egress allowlist of hosts
(`[pypi.org, "*.github.com", "api.internal:8443"]`, see `config.egress`).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from config.egress import parse_host_rule
from config.extra_repos import ExtraRepoFields, repos_problems
from config.fields import Strict, rule_error
from config.loop_fields import Command, Megabytes, Seconds
from config.sandbox_setup import SetupFields
from workflows.code_types import CodeSetup
from workflows.loop_types import Limits, RepoSource, Sandbox

# The extension point: a provider runs one command of a workspace under the sandbox's rules
# (see deploy/README.md "Sandbox providers"); these are the ones this release has.
SANDBOX_PROVIDERS = ("bubblewrap", "none")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SandboxFields(Strict):
    provider: Literal["bubblewrap", "none"] = "bubblewrap"
    network: bool | list[str] = False
    env_from: list[str] = Field(default_factory=list)
    read_only: list[str] = Field(default_factory=list)
    # A dotenv file whose keys join the commands' variables; a loop file's relative path is
    # read from the file's folder, an agent's must be absolute (see CodingSpec).
    env_file: str | None = Field(default=None, min_length=1)
    repos: list[ExtraRepoFields] = Field(default_factory=list)  # see config.extra_repos
    setup: SetupFields | None = None  # run once per workspace, see config.sandbox_setup

    @field_validator("provider", mode="before")
    @classmethod
    def _known_provider(cls, value: object) -> object:
        if value in SANDBOX_PROVIDERS:
            return value
        raise ValueError(
            f"{value!r} is not a sandbox provider here: write bubblewrap (each command in its own "
            "bubblewrap sandbox on the loop worker) or none (unconfined, trusted projects only); "
            'deploy/README.md "Sandbox providers" says what another provider implements'
        )

    @field_validator("network", mode="before")
    @classmethod
    def _network_shape(cls, value: object) -> object:
        if isinstance(value, bool) or (isinstance(value, list) and all(isinstance(e, str) for e in value)):
            return value
        raise ValueError(f'{value!r}: write true, false or a list of hosts, e.g. [pypi.org, "*.github.com"]')

    @model_validator(mode="after")
    def _names_and_paths(self) -> SandboxFields:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if isinstance(self.network, list):
            problems += _allowlist_problems(self.network, self.provider)
        for index, name in enumerate(self.env_from):
            if not _ENV_NAME.match(name):
                problems.append((("env_from", index), f"{name!r} is not an environment variable name"))
        for index, path in enumerate(self.read_only):
            if not path.startswith("/"):
                problems.append((("read_only", index), f"{path!r} must be an absolute path"))
        if self.env_file is not None and ("\n" in self.env_file or "\0" in self.env_file):
            problems.append((("env_file",), "write the path of one dotenv file, e.g. secrets/dev.env"))
        problems += repos_problems(self.repos)
        if self.setup is not None and isinstance(self.setup.network, list):
            setup_network = _allowlist_problems(self.setup.network, self.provider)
            problems += [(("setup", *at), why) for at, why in setup_network]
        if problems:
            raise rule_error(problems)
        return self


def _allowlist_problems(entries: list[str], provider: str) -> list[tuple[tuple[str | int, ...], str]]:
    if not entries:
        return [(("network",), "an empty allowlist allows nothing: write `network: false`")]
    if provider == "none":
        return [
            (("network",), "an allowlist needs `provider: bubblewrap`: unconfined commands share the network")
        ]
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for index, entry in enumerate(entries):
        try:
            parse_host_rule(entry)
        except ValueError as error:
            problems.append((("network", index), str(error)))
    return problems


class CodingLimits(Strict):
    command_timeout: Seconds = 600.0
    stall_timeout: Seconds = 120.0
    memory: Megabytes = 2048.0
    max_processes: int = Field(default=256, ge=1)
    max_file_size: Megabytes = 512.0
    output: Megabytes = 4.0


class CodingSpec(Strict):
    verify: Command | None = Field(default=None, description="The project's test command")
    limits: CodingLimits = CodingLimits()
    sandbox: SandboxFields = SandboxFields()

    @model_validator(mode="after")
    def _absolute_paths(self) -> CodingSpec:
        """An agent is stored and runs away from its file: no folder to read a relative path from."""
        where = "an absolute path on the loop worker (an agent is not read from its file's folder)"
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if self.sandbox.env_file is not None and not self.sandbox.env_file.startswith("/"):
            problems.append((("sandbox", "env_file"), f"{self.sandbox.env_file!r}: write {where}"))
        for index, repo in enumerate(self.sandbox.repos):
            if repo.path is not None and not repo.path.startswith("/"):
                problems.append((("sandbox", "repos", index, "path"), f"{repo.path!r}: write {where}"))
        if problems:
            raise rule_error(problems)
        return self

    def setup(self, repo: RepoSource) -> CodeSetup:
        """What a workspace of `repo` opened by this agent runs with."""
        limits = self.limits
        return CodeSetup(
            repo=repo,
            verify=self.verify or "",
            limits=Limits(
                command_timeout_s=limits.command_timeout,
                stall_timeout_s=limits.stall_timeout,
                memory_mb=max(1, round(limits.memory)),
                max_processes=limits.max_processes,
                max_file_mb=max(1, round(limits.max_file_size)),
                output_kb=max(1, round(limits.output * 1024)),
            ),
            sandbox=Sandbox(**self.sandbox.model_dump()),
        )
