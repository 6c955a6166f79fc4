"""deploy/k8s checked offline: the manifests against the Kubernetes JSON schemas
(kubernetes-validate ships them in its wheel), and beyond the schemas, agreeing with each other
and with the code: names they reference exist, probes hit real routes and files, env vars are
ones we read, NetworkPolicies let each workload reach what it talks to and no more. The loop
worker's pod has its own file, test_deploy_loop_worker.py.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from config.loader import parse_agent
from config.settings import Settings
from surfaces.app import create_app
from tests.integration.deploy_manifests import (
    DEPLOY,
    K8S_FILES,
    ROOT,
    assert_locked_down,
    cnpg_clusters,
    container_env,
    k8s_objects,
    named,
    of_kind,
    pod_specs,
    quantity,
    yaml_docs,
)

K8S_VERSIONS = ("1.29", kubernetes_validate.utils.latest_version())

CODE_READING_ENV = ("config/settings.py", "workers/options.py", "workers/run.py", "workers/telemetry.py")


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("path", K8S_FILES, ids=lambda p: p.name)
def test_manifest_is_valid_kubernetes(path: Path, version: str) -> None:
    docs = yaml_docs(path)
    assert docs, f"{path.name} has no objects"
    for doc in docs:
        # strict: an unknown or misspelt field is an error, as it would be on the server.
        kubernetes_validate.validate(doc, version, strict=True)


def test_a_broken_manifest_is_rejected() -> None:
    bad = of_kind("Deployment", "surfaces")[0]
    bad = json.loads(json.dumps(bad))
    bad["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}  # misspelt field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSIONS[-1], strict=True)


def test_every_referenced_configmap_and_secret_exists() -> None:
    defined = {(d["kind"], d["metadata"]["name"]) for d in k8s_objects()}
    # CloudNativePG generates <cluster>-app with a `uri` key for the cluster's owner.
    for cluster in cnpg_clusters().values():
        if cluster["metadata"]["namespace"] == "openloop":
            defined.add(("Secret", cluster["metadata"]["name"] + "-app"))
    refs: set[tuple[str, str]] = set()
    for spec in pod_specs():
        for container in spec["containers"]:
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    refs.add(("ConfigMap", source["configMapRef"]["name"]))
                if "secretRef" in source:
                    refs.add(("Secret", source["secretRef"]["name"]))
            for value in container_env(container).values():
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
    for secret in yaml_docs(DEPLOY / "k8s" / "secrets.example.yaml"):
        assert not secret.get("data") and not secret.get("stringData"), secret["metadata"]["name"]


def test_every_openloop_env_var_in_the_manifests_is_one_the_code_reads() -> None:
    code = "".join((ROOT / path).read_text() for path in CODE_READING_ENV)
    names: set[str] = set()
    for doc in k8s_objects():
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "openloop-settings":
            names |= set(doc["data"])
    for spec in pod_specs():
        for container in spec["containers"]:
            names |= set(container_env(container))
    unknown = {n for n in names if n.startswith("OPENLOOP_") and f'"{n}"' not in code}
    assert unknown == set()


def test_workers_drain_scale_and_report_readiness() -> None:
    hpas = {h["spec"]["scaleTargetRef"]["name"]: h for h in of_kind("HorizontalPodAutoscaler")}
    for deployment in of_kind("Deployment", "worker"):
        name = deployment["metadata"]["name"]
        assert name in hpas, f"{name} has no HorizontalPodAutoscaler"
        assert "replicas" not in deployment["spec"], "the HPA owns the replica count"
        assert hpas[name]["spec"]["minReplicas"] >= 2
        template = deployment["spec"]["template"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
        container = template["spec"]["containers"][0]
        env = container_env(container)
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
        assert_locked_down(template["spec"])


def test_surfaces_probes_hit_real_routes_and_the_service_reaches_the_pods() -> None:
    routes = {getattr(route, "path", None) for route in create_app(Settings(), None).routes}
    deployment = of_kind("Deployment", "surfaces")[0]
    template = deployment["spec"]["template"]
    container = template["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz" in routes
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz" in routes
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["readinessProbe"]["httpGet"]["port"] in port_names
    assert int(container_env(container)["OPENLOOP_HTTP_ADDRESS"].rsplit(":", 1)[1]) == port_names["http"]
    service = of_kind("Service")[0]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert all(p["targetPort"] in port_names for p in service["spec"]["ports"])
    assert_locked_down(template["spec"])


def test_release_job_migrates_applies_the_agents_configmap_and_promotes_its_build() -> None:
    job = of_kind("Job")[0]
    spec = job["spec"]["template"]["spec"]
    script = spec["containers"][0]["args"][0]
    assert "openloop setup" in script and "openloop promote" in script
    mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
    volume = next(v for v in spec["volumes"] if v.get("configMap", {}).get("name") == "openloop-agents")
    assert f"openloop agents apply -f {mounts[volume['name']]}" in script
    assert job["metadata"]["labels"]["openloop.ai/build-id"] in {
        d["metadata"]["labels"]["openloop.ai/build-id"] for d in of_kind("Deployment", "worker")
    }
    for name, text in named("ConfigMap", "openloop-agents")["data"].items():
        assert parse_agent(text, source=name).name  # every shipped agent definition is valid
    assert_locked_down(spec)


def test_temporal_and_postgres_references_agree() -> None:
    clusters = cnpg_clusters()
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
    settings = named("ConfigMap", "openloop-settings")["data"]
    namespaces = {n["name"] for n in values["server"]["config"]["namespaces"]["namespace"]}
    assert settings["OPENLOOP_NAMESPACE"] in namespaces


def test_every_container_has_cpu_and_memory_requests_and_limits() -> None:
    for spec in pod_specs():
        for container in spec["containers"]:
            resources = container["resources"]
            for resource in ("cpu", "memory"):
                request, limit = resources["requests"][resource], resources["limits"][resource]
                assert quantity(limit) >= quantity(request), (container["name"], resource)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    expressions = selector.get("matchExpressions", [])
    assert all(e["operator"] == "In" for e in expressions), "only matchLabels and In are read here"
    matched = all(labels.get(e["key"]) in e["values"] for e in expressions)
    return matched and selector.get("matchLabels", {}).items() <= labels.items()


def _rules(labels: dict[str, str], direction: str) -> list[dict[str, Any]]:
    """The ingress or egress rules of every NetworkPolicy that selects pods with these labels."""
    policies = [p for p in of_kind("NetworkPolicy") if _selects(p["spec"]["podSelector"], labels)]
    return [rule for policy in policies for rule in policy["spec"].get(direction, [])]


def test_namespace_denies_by_default() -> None:
    deny = [p["spec"] for p in of_kind("NetworkPolicy") if p["spec"]["podSelector"] == {}]
    assert deny == [{"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}]


def test_network_policies_allow_each_workload_exactly_what_it_talks_to() -> None:
    expected_egress = {"worker": {53, 443, 5432, 7233}, "loop-worker": {53, 443, 5432, 7233}}
    expected_egress |= {"surfaces": {53, 443, 5432, 7233}, "release": {53, 5432, 7233}}
    settings = named("ConfigMap", "openloop-settings")["data"]
    temporal_host, temporal_port = settings["OPENLOOP_TEMPORAL_ADDRESS"].split(":")
    db = named("NetworkPolicy", "openloop-db")
    workloads = [d for d in k8s_objects() if d["kind"] in ("Deployment", "Job")]
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
        assert db["spec"]["podSelector"]["matchLabels"]["cnpg.io/cluster"] in cnpg_clusters()
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
