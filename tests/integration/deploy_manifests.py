"""Reading deploy/ for the deploy tests: the Kubernetes manifests, parsed once, and the lookups
and checks the tests share."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_FILES = sorted((DEPLOY / "k8s").glob("*.yaml"))


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.load_all(path.read_text(), Loader=_Loader) if doc]


def k8s_objects() -> list[dict[str, Any]]:
    return [doc for path in K8S_FILES for doc in yaml_docs(path)]


def named(kind: str, name: str, docs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return next(d for d in (docs or k8s_objects()) if d["kind"] == kind and d["metadata"]["name"] == name)


def cnpg_clusters() -> dict[str, dict[str, Any]]:
    """The CloudNativePG clusters, by name."""
    docs = yaml_docs(DEPLOY / "postgres" / "cnpg-cluster.yaml")
    return {c["metadata"]["name"]: c for c in docs if c["kind"] == "Cluster"}


def of_kind(kind: str, component: str | None = None) -> list[dict[str, Any]]:
    found = [d for d in k8s_objects() if d["kind"] == kind]
    if component:
        found = [d for d in found if d["metadata"]["labels"].get("app.kubernetes.io/component") == component]
    assert found, f"no {kind} {component or ''} in deploy/k8s"
    return found


def container_env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def pod_specs() -> list[dict[str, Any]]:
    return [d["spec"]["template"]["spec"] for d in k8s_objects() if d["kind"] in ("Deployment", "Job")]


def assert_locked_down(pod: dict[str, Any]) -> None:
    # pytest rewrites asserts only in test files, so each one here says what it saw.
    pod_context = pod["securityContext"]
    assert pod_context["runAsNonRoot"] is True and pod_context["runAsUser"] != 0, pod_context
    for container in pod["containers"]:
        name, context = container["name"], container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, name
        assert context["readOnlyRootFilesystem"] is True, name
        assert context["capabilities"]["drop"] == ["ALL"], (name, context["capabilities"])
        assert any(m["mountPath"] == "/tmp" for m in container["volumeMounts"]), f"{name}: writable /tmp"
        assert container["resources"]["limits"]["memory"], f"{name}: memory limit"


def quantity(value: str | int) -> float:
    match = re.fullmatch(r"([\d.]+)(m|Ki|Mi|Gi)?", str(value))
    assert match, value
    return float(match.group(1)) * {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}.get(match.group(2), 1)
