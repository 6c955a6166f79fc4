"""The loop worker's deployment checked offline: its pod is unprivileged yet able to make
bubblewrap sandboxes, it alone needs the baseline Pod Security level, and the seccomp profile it
runs under is tested by running bubblewrap under it.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.deploy_manifests import (
    DEPLOY,
    assert_locked_down,
    container_env,
    k8s_objects,
    named,
    of_kind,
    quantity,
)
from workers.loops import MAX_WORKSPACES
from workflows.loop_types import Limits

SECCOMP_PROFILE = DEPLOY / "seccomp" / "openloop-bwrap.json"


def test_loop_worker_runs_loops_in_a_workspace_volume_unprivileged_but_able_to_sandbox() -> None:
    pod = of_kind("Deployment", "loop-worker")[0]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    worker = of_kind("Deployment", "worker")[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["worker", "--loops"] and container["image"] == worker["image"]
    env = container_env(container)
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    workspace = next(v for v in pod["volumes"] if v["name"] == mounts[env["OPENLOOP_WORKSPACES_DIR"]])
    assert quantity(workspace["emptyDir"]["sizeLimit"]) >= 2**30
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
    memory = quantity(container["resources"]["limits"]["memory"])
    assert memory >= MAX_WORKSPACES * Limits().memory_mb * 2**20
    assert_locked_down(pod)


def test_only_the_loop_worker_falls_short_of_restricted_and_baseline_admits_it() -> None:
    labels = named("Namespace", "openloop")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert {labels["pod-security.kubernetes.io/warn"], labels["pod-security.kubernetes.io/audit"]} == {
        "restricted"
    }
    for doc in k8s_objects():
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
