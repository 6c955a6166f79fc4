"""The bubblewrap command line of one sandboxed command, and who it runs as.

What the kernel enforces, not a sampler: every writable tmpfs (`/tmp`, `/dev/shm`) has a size
inside the memory limit and `/dev` is read-only, so memory cannot hide in a filesystem; and
the command never runs as root, so `RLIMIT_NPROC` binds (the kernel exempts uid 0 from it,
inside a user namespace mapped to root too). A worker running as root builds the sandbox as
root, without a user namespace, and drops the command to an unprivileged uid of the
workspace's own (`sandbox_uid`) with no capabilities left; the workspace is handed to that
uid before each command. A worker running as another user keeps bubblewrap's usual user
namespace, where the command is that user and the limit already binds.
"""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

from activities.loops.egress.session import EgressMount
from workflows.loop_types import Limits, Sandbox

__all__ = [
    "bwrap_argv",
    "command_env",
    "env_args_fd",
    "hand_over",
    "repos_moved",
    "sandbox_uid",
    "tmpfs_used_bytes",
]

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# A uid of its own per workspace, so two loops' commands never share a process count; far
# above the users a system or a container's subordinate ranges hand out.
SANDBOX_UID_BASE = 3_000_000
SANDBOX_UID_SPAN = 1_000_000
SHM_SHARE = 4  # /dev/shm gets a quarter of the memory limit: semaphores and small buffers
WRITABLE_TMPFS = ("/tmp", "/dev/shm")


def as_root() -> bool:
    return os.geteuid() == 0


def sandbox_uid(workspace: Path) -> int:
    """The unprivileged uid a root worker runs this workspace's commands as."""
    return SANDBOX_UID_BASE + zlib.crc32(str(workspace).encode()) % SANDBOX_UID_SPAN


def hand_over(workspace: Path, uid: int) -> None:
    """Make every entry of the workspace the command's own, so it can write what the worker
    wrote; links are changed themselves, never followed. The workspace itself must stay
    enterable by bubblewrap, which runs as root with no capability to pass a closed folder."""
    os.chmod(workspace, os.stat(workspace).st_mode | 0o711)
    for folder, folders, names in os.walk(workspace, followlinks=False):
        if folder == str(workspace):
            folders[:] = [name for name in folders if name != ".git"]  # the read-only view
        for name in [folder, *(os.path.join(folder, entry) for entry in folders + names)]:
            with suppress(FileNotFoundError):
                if os.lstat(name).st_uid != uid:
                    os.lchown(name, uid, uid)


def command_env(env: Mapping[str, str]) -> dict[str, str]:
    python_bin = Path(sys.prefix).resolve() / "bin"
    return {"PATH": f"{python_bin}:{SYSTEM_PATH}", "HOME": "/tmp", "LANG": "C.UTF-8", **env}


def _sandbox_env(env: Mapping[str, str], egress: EgressMount | None) -> dict[str, str]:
    return command_env(env) | (egress.env if egress else {})


def env_args_fd(env: Mapping[str, str], egress: EgressMount | None = None) -> int:
    """A file descriptor holding the command's variables as bwrap arguments (`--args FD`):
    a process's command line is readable by every user of the host, its open files are not,
    so values from `env_from` and `env_file` never appear in a process listing. The caller
    passes it to bwrap and closes it."""
    words = [word for name, value in _sandbox_env(env, egress).items() for word in ("--setenv", name, value)]
    fd = os.memfd_create("openloop-sandbox-env")
    try:
        left = memoryview(b"".join(word.encode() + b"\0" for word in words))
        while left:
            left = left[os.write(fd, left) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _parents(paths: list[Path]) -> list[Path]:
    """Folders above the bind points, outermost first, so they can be made traversable."""
    above = {parent for path in paths for parent in path.parents if parent != Path("/")}
    system = [Path(d) for d in SYSTEM_DIRS]
    kept = [p for p in above if not any(p == d or p.is_relative_to(d) for d in system)]
    return sorted(kept, key=lambda p: len(p.parts))


def bwrap_argv(
    command: str,
    workspace: Path,
    env: Mapping[str, str],
    limits: Limits,
    sandbox: Sandbox,
    git_dir: Path | None = None,
    egress: EgressMount | None = None,
    env_fd: int | None = None,
) -> list[str]:
    """With `egress` (an allowlist), the command keeps an empty network namespace and reaches
    the worker's proxies through the mount's sockets; `network: true` alone shares the worker's.
    With `env_fd` (from `env_args_fd`), the variables are read from it, not the command line.
    Each of `sandbox.repos` is bound read-only over its own folder in the writable workspace."""
    root = as_root()
    shared = sandbox.network is True and egress is None
    argv = ["bwrap", "--die-with-parent", "--new-session"]
    if root:
        # No user namespace: the command's uid must be a real unprivileged one. Only what
        # setpriv needs to drop to it is kept, and setpriv drops that too.
        argv += ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        if not shared:
            argv.append("--unshare-net")
    else:
        # Run as root, bwrap would keep every capability unless told otherwise.
        argv += ["--unshare-all", "--cap-drop", "ALL"]
        if shared:
            argv.append("--share-net")
    for system_dir in SYSTEM_DIRS:
        if os.path.islink(system_dir):  # merged /usr: /lib -> usr/lib
            argv += ["--symlink", os.readlink(system_dir), system_dir]
        elif os.path.isdir(system_dir):
            argv += ["--ro-bind", system_dir, system_dir]
    memory = limits.memory_mb << 20
    argv += ["--dev", "/dev", "--remount-ro", "/dev", "--proc", "/proc"]
    argv += ["--perms", "1777", "--size", str(memory // SHM_SHARE), "--tmpfs", "/dev/shm"]
    argv += ["--perms", "1777", "--size", str(memory), "--tmpfs", "/tmp"]
    read_only = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    read_only |= {Path(path).resolve() for path in sandbox.read_only}
    for parent in _parents([*read_only, workspace]):
        argv += ["--perms", "0755", "--dir", str(parent)]
    binds = [("--ro-bind", path, path) for path in sorted(read_only)] + [("--bind", workspace, workspace)]
    if git_dir is not None and git_dir.is_dir():
        binds.append(("--ro-bind", git_dir, workspace / ".git"))
    binds += [("--ro-bind", workspace / repo.into, workspace / repo.into) for repo in sandbox.repos]
    # Parents before children: a read-only path inside the workspace stays read-only, and a
    # workspace under a read-only path stays writable.
    for flag, source, target in sorted(binds, key=lambda bind: len(bind[2].parts)):
        argv += [flag, str(source), str(target)]
    for source_path, target_path in egress.binds if egress else []:
        # bwrap would make the folder above private to root, out of the command's reach.
        argv += [
            "--perms",
            "0755",
            "--dir",
            str(Path(target_path).parent),
            "--ro-bind",
            source_path,
            target_path,
        ]
    argv.append("--clearenv")
    if env_fd is not None:
        argv += ["--args", str(env_fd)]
    else:
        for name, value in _sandbox_env(env, egress).items():
            argv += ["--setenv", name, value]
    argv += ["--chdir", str(workspace)]
    if root:
        uid = str(sandbox_uid(workspace))
        argv += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--"]
    return argv + (egress.prefix if egress else []) + ["/bin/sh", "-c", command]


def repos_moved(workspace: Path, sandbox: Sandbox) -> str | None:
    """None when each of `sandbox.repos` is still a plain folder where it was cloned. A command
    could swap one for a link, and bwrap would then bind whatever host path it points to."""
    for repo in sandbox.repos:
        target = workspace / repo.into
        if not target.is_dir() or Path(os.path.realpath(target)) != workspace.resolve() / repo.into:
            return (
                f"sandbox.repos: {repo.into} is no longer the folder cloned when the workspace was "
                "acquired (a command moved or replaced it); start again on a fresh workspace"
            )
    return None


def tmpfs_used_bytes(pid: int) -> int:
    """What the command holds in its writable in-memory filesystems (seen through its root)."""
    used = 0
    for mount in WRITABLE_TMPFS:
        with suppress(OSError):
            stats = os.statvfs(f"/proc/{pid}/root{mount}")
            used += (stats.f_blocks - stats.f_bfree) * stats.f_frsize
    return used
