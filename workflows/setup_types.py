"""A workspace's setup (`sandbox.setup`): the commands that install a project's dependencies
once, when a workspace is taken, with a network allowlist of their own; and what became of
them, as the loop's first round note, `openloop loops status` and a coding task show it.
Pure data and words, shared by the config reader, the acquire activity and the workflows.
Released names and fields are permanent."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from workflows.egress_report import EgressReport, egress_lines

__all__ = ["SandboxSetup", "SetupReport", "setup_line"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SandboxSetup(_Frozen):
    """Shell lines run in order in the workspace, in the same sandbox as the loop's commands
    but with `network` instead of the sandbox's; what they leave untracked in the workspace
    (`.venv/`, `node_modules/`) is cached on the worker per repository and lockfiles."""

    commands: list[str]
    network: bool | list[str] = False  # typically the package registries
    env: dict[str, str] = Field(default_factory=dict)  # plain values for these commands only; never secrets
    cache: bool = True


class SetupReport(_Frozen):
    passed: bool
    reused: bool = False  # restored from this worker's cache: the commands did not run
    duration_s: float = 0.0
    commands: int = 0
    output_id: int | None = None  # the stored output (`openloop loops logs ID --step setup`)
    reason: str = ""  # why it failed, in words
    cached: str = ""  # what became of the cache, e.g. "cached (41.2 MB)" or "not cached: …"
    egress: EgressReport | None = None  # what its network allowlist refused and let through


def setup_line(report: SetupReport) -> str:
    """`setup reused from this worker's cache in 0.4 s` or `setup passed in 38.1 s (2 commands;
    cached (41.2 MB)); blocked: evil.example:443 (not in the allowlist)`."""
    if report.reused:
        line = f"setup reused from this worker's cache in {report.duration_s:.1f} s"
    elif report.passed:
        detail = "; ".join(filter(None, [f"{report.commands} command(s)", report.cached]))
        line = f"setup passed in {report.duration_s:.1f} s ({detail})"
    else:
        line = f"setup failed after {report.duration_s:.1f} s: {report.reason}"
    return "; ".join([line, *egress_lines(report.egress, allowed=False)])
