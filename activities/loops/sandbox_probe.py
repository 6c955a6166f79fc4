"""Can this worker make a bubblewrap sandbox? Checked once per bwrap binary by running `true`
in the sandbox every command gets (`sandbox_problem`), and the process limits every command
runs under (`prlimit_argv`). A worker that cannot make one never runs a command unconfined:
`activities.loops.sandbox` raises `SandboxUnavailable`."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from activities.loops.bwrap import SYSTEM_PATH, as_root, bwrap_argv, hand_over, sandbox_uid
from workflows.loop_types import Limits, Sandbox

__all__ = ["KUBERNETES_HINT", "SandboxUnavailable", "prlimit_argv", "sandbox_problem"]

PROBE_TIMEOUT_S = 10.0
KUBERNETES_HINT = (
    "on Kubernetes the pod needs user namespaces and an unmasked /proc (seccomp and AppArmor "
    "'Unconfined' and procMount 'Unmasked', or a privileged container); see deploy/README.md"
)


class SandboxUnavailable(RuntimeError):
    """The loop asked for bubblewrap and this worker cannot make the sandbox."""


def prlimit_argv(limits: Limits) -> list[str]:
    nproc, fsize = limits.max_processes, limits.max_file_mb << 20
    return ["prlimit", f"--nproc={nproc}", f"--fsize={fsize}", "--core=0", "--"]


_WORKING: set[str] = set()  # bwrap binaries whose probe made a sandbox


def sandbox_problem() -> str | None:
    """None when bubblewrap can make a sandbox here, else what a person should do about it."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed: apt-get install bubblewrap"
    if shutil.which("prlimit") is None or (as_root() and shutil.which("setpriv") is None):
        return "prlimit or setpriv is not installed: apt-get install util-linux"
    if bwrap in _WORKING:
        return None  # probed already: a sandbox that worked once keeps working
    with tempfile.TemporaryDirectory() as workspace:
        if as_root():
            hand_over(Path(workspace), sandbox_uid(Path(workspace)))
        argv = prlimit_argv(Limits()) + bwrap_argv("true", Path(workspace), {}, Limits(), Sandbox())
        try:
            probe = subprocess.run(
                argv, capture_output=True, timeout=PROBE_TIMEOUT_S, env={"PATH": SYSTEM_PATH}, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"bwrap cannot create a sandbox here: {error}; {KUBERNETES_HINT}"
    if probe.returncode != 0:
        stderr = probe.stderr.decode(errors="replace").strip()
        return f"bwrap cannot create namespaces here: {stderr}; {KUBERNETES_HINT}"
    _WORKING.add(bwrap)
    return None
