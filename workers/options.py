"""How the production worker is tuned and secured, read from the environment.

`openloop worker` (workers/run.py) runs with these; the Kubernetes manifests and the compose
file set them. Every knob is an `OPENLOOP_*` variable with a default that suits one pod:

| variable | default | what it does |
| --- | --- | --- |
| OPENLOOP_MAX_CONCURRENT_ACTIVITIES | see workers/worker.py | activity slots (model calls, tools) |
| OPENLOOP_MAX_CONCURRENT_WORKFLOW_TASKS | see workers/worker.py | workflow task slots |
| OPENLOOP_MAX_CACHED_WORKFLOWS | see workers/worker.py | sticky cache size (memory) |
| OPENLOOP_SHUTDOWN_GRACE_SECONDS | 30 | on SIGTERM, time in-flight activities get to finish |
| OPENLOOP_BUILD_ID | unset | turns on worker deployment versioning with this build id |
| OPENLOOP_DEPLOYMENT_NAME | openloop | the worker deployment the build id belongs to |
| OPENLOOP_VERSIONING_BEHAVIOR | pinned | pinned or auto_upgrade, for workflows without their own |
| OPENLOOP_APPLY_MIGRATIONS | true | false: wait for a migration Job instead of migrating |
| OPENLOOP_READY_FILE | unset | readiness file, refreshed while Temporal answers |
| OPENLOOP_TEMPORAL_TLS_CERT / _KEY | unset | client certificate and key files (mTLS) |
| OPENLOOP_TEMPORAL_TLS_CA | unset | CA bundle of a self-hosted cluster's frontend |
| OPENLOOP_TEMPORAL_TLS_SERVER_NAME | unset | TLS server name when it differs from the address |

Plain TLS and API keys (Temporal Cloud) come from `config.settings` (OPENLOOP_TEMPORAL_TLS,
OPENLOOP_TEMPORAL_API_KEY), as for every other client.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import TLSConfig
from temporalio.worker import WorkerDeploymentConfig

from config.settings import Settings
from workflows.payloads import data_converter

DEFAULT_SHUTDOWN_GRACE_SECONDS = 30.0
DEFAULT_DEPLOYMENT_NAME = "openloop"
_BEHAVIORS = {
    "pinned": VersioningBehavior.PINNED,
    "auto_upgrade": VersioningBehavior.AUTO_UPGRADE,
}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class WorkerOptionsError(ValueError):
    """A worker setting in the environment is malformed; the message names the variable."""


@dataclass(frozen=True)
class Limits:
    """Slots per worker process (None: the default in workers/worker.py); a deployment that
    needs more throughput gets more replicas rather than bigger ones."""

    max_concurrent_activities: int | None = None
    max_concurrent_workflow_tasks: int | None = None
    max_cached_workflows: int | None = None


@dataclass(frozen=True)
class Versioning:
    """Worker deployment versioning: this build only gets workflows it can replay."""

    build_id: str
    deployment_name: str = DEFAULT_DEPLOYMENT_NAME
    behavior: VersioningBehavior = VersioningBehavior.PINNED

    def deployment_config(self) -> WorkerDeploymentConfig:
        return WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(self.deployment_name, self.build_id),
            use_worker_versioning=True,
            default_versioning_behavior=self.behavior,
        )


@dataclass(frozen=True)
class RunOptions:
    limits: Limits = field(default_factory=Limits)
    versioning: Versioning | None = None
    shutdown_grace_seconds: float = DEFAULT_SHUTDOWN_GRACE_SECONDS
    apply_migrations: bool = True
    ready_file: Path | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RunOptions:
        env = os.environ if environ is None else environ
        build_id = _get(env, "OPENLOOP_BUILD_ID")
        versioning = None
        if build_id:
            behavior = (_get(env, "OPENLOOP_VERSIONING_BEHAVIOR") or "pinned").lower()
            if behavior not in _BEHAVIORS:
                raise WorkerOptionsError(
                    f"OPENLOOP_VERSIONING_BEHAVIOR={behavior!r}: use one of {', '.join(_BEHAVIORS)}"
                )
            versioning = Versioning(
                build_id=build_id,
                deployment_name=_get(env, "OPENLOOP_DEPLOYMENT_NAME") or DEFAULT_DEPLOYMENT_NAME,
                behavior=_BEHAVIORS[behavior],
            )
        ready = _get(env, "OPENLOOP_READY_FILE")
        return cls(
            limits=Limits(
                max_concurrent_activities=_int(env, "OPENLOOP_MAX_CONCURRENT_ACTIVITIES"),
                # The SDK needs two workflow task slots when the sticky cache is on.
                max_concurrent_workflow_tasks=_int(env, "OPENLOOP_MAX_CONCURRENT_WORKFLOW_TASKS", minimum=2),
                max_cached_workflows=_int(env, "OPENLOOP_MAX_CACHED_WORKFLOWS", minimum=0),
            ),
            versioning=versioning,
            shutdown_grace_seconds=_float(
                env, "OPENLOOP_SHUTDOWN_GRACE_SECONDS", DEFAULT_SHUTDOWN_GRACE_SECONDS
            ),
            apply_migrations=_bool(env, "OPENLOOP_APPLY_MIGRATIONS", True),
            ready_file=Path(ready) if ready else None,
        )


def tls_from_env(settings: Settings, environ: Mapping[str, str] | None = None) -> TLSConfig | bool:
    """mTLS from certificate files if any are named, else plain TLS as the settings say."""
    env = os.environ if environ is None else environ
    cert, key = _get(env, "OPENLOOP_TEMPORAL_TLS_CERT"), _get(env, "OPENLOOP_TEMPORAL_TLS_KEY")
    ca, server_name = _get(env, "OPENLOOP_TEMPORAL_TLS_CA"), _get(env, "OPENLOOP_TEMPORAL_TLS_SERVER_NAME")
    if not (cert or key or ca or server_name):
        return settings.temporal_tls or settings.temporal_api_key is not None
    if bool(cert) != bool(key):
        raise WorkerOptionsError(
            "set both OPENLOOP_TEMPORAL_TLS_CERT and OPENLOOP_TEMPORAL_TLS_KEY for a client "
            "certificate, or neither"
        )
    return TLSConfig(
        client_cert=_read(cert, "OPENLOOP_TEMPORAL_TLS_CERT") if cert else None,
        client_private_key=_read(key, "OPENLOOP_TEMPORAL_TLS_KEY") if key else None,
        server_root_ca_cert=_read(ca, "OPENLOOP_TEMPORAL_TLS_CA") if ca else None,
        domain=server_name,
    )


async def connect_from_env(settings: Settings) -> Client:
    """The Temporal client of `surfaces.client.connect`, plus mTLS files when configured."""
    from surfaces.client import connect
    from workers.telemetry import tracing_interceptors

    tls = tls_from_env(settings)
    if not isinstance(tls, TLSConfig):
        return await connect(settings)
    api_key = settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.namespace,
        data_converter=data_converter,
        tls=tls,
        api_key=api_key,
        interceptors=tracing_interceptors(settings),
    )


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _int(env: Mapping[str, str], name: str, minimum: int = 1) -> int | None:
    raw = _get(env, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise WorkerOptionsError(f"{name}={raw!r} is not a whole number") from None
    if value < minimum:
        raise WorkerOptionsError(f"{name}={value} must be at least {minimum}")
    return value


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = _get(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise WorkerOptionsError(f"{name}={raw!r} is not a number of seconds") from None
    if value < 0:
        raise WorkerOptionsError(f"{name}={value} must not be negative")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(env, name)
    if raw is None:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise WorkerOptionsError(f"{name}={raw!r}: use true or false")


def _read(path: str, name: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise WorkerOptionsError(f"{name}: cannot read {path} ({exc.strerror})") from None
