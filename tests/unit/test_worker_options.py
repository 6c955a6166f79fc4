"""The production worker's settings from the environment, and its readiness probe files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pydantic import SecretStr
from temporalio.common import VersioningBehavior
from temporalio.service import TLSConfig

from config.settings import Settings
from workers.options import DEFAULT_SHUTDOWN_GRACE_SECONDS, RunOptions, WorkerOptionsError, tls_from_env
from workers.probe import ReadinessFiles
from workers.probe import main as probe


def test_nothing_set_means_unversioned_with_the_worker_defaults() -> None:
    options = RunOptions.from_env({})
    assert options.versioning is None
    assert options.limits.max_concurrent_activities is None  # build_worker's default applies
    assert options.shutdown_grace_seconds == DEFAULT_SHUTDOWN_GRACE_SECONDS
    assert options.apply_migrations is True and options.ready_file is None


def test_a_build_id_turns_on_pinned_deployment_versioning() -> None:
    options = RunOptions.from_env({"OPENLOOP_BUILD_ID": "2024.06.1", "OPENLOOP_DEPLOYMENT_NAME": "agents"})
    assert options.versioning is not None
    config = options.versioning.deployment_config()
    assert config.use_worker_versioning is True
    assert (config.version.deployment_name, config.version.build_id) == ("agents", "2024.06.1")
    assert config.default_versioning_behavior == VersioningBehavior.PINNED
    env = {"OPENLOOP_BUILD_ID": "b", "OPENLOOP_VERSIONING_BEHAVIOR": "AUTO_UPGRADE"}
    upgrading = RunOptions.from_env(env)
    assert upgrading.versioning and upgrading.versioning.behavior == VersioningBehavior.AUTO_UPGRADE


def test_limits_grace_and_switches_are_read() -> None:
    options = RunOptions.from_env(
        {
            "OPENLOOP_MAX_CONCURRENT_ACTIVITIES": "40",
            "OPENLOOP_MAX_CONCURRENT_WORKFLOW_TASKS": "8",
            "OPENLOOP_MAX_CACHED_WORKFLOWS": "0",
            "OPENLOOP_SHUTDOWN_GRACE_SECONDS": "12.5",
            "OPENLOOP_APPLY_MIGRATIONS": "false",
            "OPENLOOP_READY_FILE": "/tmp/x/ready",
        }
    )
    assert (options.limits.max_concurrent_activities, options.limits.max_concurrent_workflow_tasks) == (40, 8)
    assert options.limits.max_cached_workflows == 0
    assert options.shutdown_grace_seconds == 12.5
    assert options.apply_migrations is False and options.ready_file == Path("/tmp/x/ready")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OPENLOOP_MAX_CONCURRENT_ACTIVITIES", "many"),
        ("OPENLOOP_MAX_CONCURRENT_ACTIVITIES", "0"),
        ("OPENLOOP_MAX_CONCURRENT_WORKFLOW_TASKS", "1"),
        ("OPENLOOP_SHUTDOWN_GRACE_SECONDS", "-1"),
        ("OPENLOOP_APPLY_MIGRATIONS", "maybe"),
        ("OPENLOOP_VERSIONING_BEHAVIOR", "sometimes"),
    ],
)
def test_malformed_values_are_refused_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(WorkerOptionsError, match=name):
        RunOptions.from_env({"OPENLOOP_BUILD_ID": "b1", name: value})


def test_tls_follows_the_settings_without_certificate_files() -> None:
    assert tls_from_env(Settings(), {}) is False
    assert tls_from_env(Settings(temporal_tls=True), {}) is True
    assert tls_from_env(Settings(temporal_api_key=SecretStr("k")), {}) is True


def test_mtls_reads_the_certificate_files(tmp_path: Path) -> None:
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / name).write_bytes(f"PEM {name}".encode())
    env = {
        "OPENLOOP_TEMPORAL_TLS_CERT": str(tmp_path / "tls.crt"),
        "OPENLOOP_TEMPORAL_TLS_KEY": str(tmp_path / "tls.key"),
        "OPENLOOP_TEMPORAL_TLS_CA": str(tmp_path / "ca.crt"),
        "OPENLOOP_TEMPORAL_TLS_SERVER_NAME": "temporal.internal",
    }
    tls = tls_from_env(Settings(), env)
    assert isinstance(tls, TLSConfig)
    assert (tls.client_cert, tls.client_private_key, tls.server_root_ca_cert) == (
        b"PEM tls.crt",
        b"PEM tls.key",
        b"PEM ca.crt",
    )
    assert tls.domain == "temporal.internal"


def test_mtls_half_configured_or_unreadable_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(WorkerOptionsError, match="OPENLOOP_TEMPORAL_TLS_KEY"):
        tls_from_env(Settings(), {"OPENLOOP_TEMPORAL_TLS_CERT": str(tmp_path / "tls.crt")})
    missing = {"OPENLOOP_TEMPORAL_TLS_CA": str(tmp_path / "nope.pem")}
    with pytest.raises(WorkerOptionsError, match="nope.pem"):
        tls_from_env(Settings(), missing)


def test_probe_passes_only_for_a_fresh_file(tmp_path: Path) -> None:
    files = ReadinessFiles(tmp_path / "run" / "ready")
    assert probe([str(tmp_path / "run" / "ready"), "30"]) == 1  # not written yet
    files.beat(ready=True)
    assert probe([str(files.ready_file), "30"]) == 0
    assert probe([str(files.alive_file), "30"]) == 0
    stale = time.time() - 120
    os.utime(files.ready_file, (stale, stale))  # type: ignore[arg-type]
    assert probe([str(files.ready_file), "30"]) == 1
    files.beat(ready=False)  # Temporal not answering: not ready, but alive
    assert not files.ready_file.exists()  # type: ignore[union-attr]
    assert probe([str(files.alive_file), "30"]) == 0
    files.clear()
    assert probe([str(files.alive_file), "30"]) == 1
