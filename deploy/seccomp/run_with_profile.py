"""Run a command under a seccomp profile the way a container runtime would: check a node for
loop workers before scheduling them there, or try a profile change.

    sudo python3 deploy/seccomp/run_with_profile.py deploy/seccomp/openloop-bwrap.json --user 65534 -- \\
        bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp true

The profile is in the OCI format the kubelet hands to containerd or CRI-O (defaultAction,
architectures, syscalls with names, action and errnoRet; no argument filters). It is loaded
with libseccomp, as runc and crun do, after no_new_privs is set (allowPrivilegeEscalation:
false). With --user, a root caller first becomes that unprivileged user, as in the pod.
Exit status: the command's; 2 when the profile cannot be loaded.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import sys
from typing import Any

ACTIONS = {"SCMP_ACT_ALLOW": 0x7FFF0000, "SCMP_ACT_ERRNO": 0x00050000, "SCMP_ACT_KILL_PROCESS": 0x80000000}


def _libseccomp() -> ctypes.CDLL:
    lib = ctypes.CDLL("libseccomp.so.2")
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    return lib


def build_filter(lib: ctypes.CDLL, profile: dict[str, Any]) -> int:
    """A libseccomp filter context for the profile; ValueError names what it cannot express."""
    context = lib.seccomp_init(ACTIONS[profile["defaultAction"]])
    if not context:
        raise ValueError("libseccomp could not start a filter")
    for arch in profile.get("architectures", []):
        token = lib.seccomp_arch_resolve_name(arch.removeprefix("SCMP_ARCH_").lower().encode())
        # The native architecture is in every new filter already.
        if not token or lib.seccomp_arch_add(context, token) not in (0, -errno.EEXIST):
            raise ValueError(f"unknown architecture {arch}")
    for rule in profile.get("syscalls", []):
        if rule.get("args"):
            raise ValueError("argument filters are not supported here")
        action = ACTIONS[rule["action"]] | rule.get("errnoRet", 0)
        for name in rule["names"]:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number == -1:  # unknown to libseccomp on every architecture: a typo
                raise ValueError(f"unknown system call {name}")
            if lib.seccomp_rule_add(context, action, number, 0) != 0:
                raise ValueError(f"cannot add a rule for {name}")
    return int(context)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", help="an OCI seccomp profile (JSON)")
    parser.add_argument("--user", type=int, help="become this uid (and gid) first, when run as root")
    parser.add_argument("command", nargs="+", help="the command to run, after --")
    args = parser.parse_args(argv)
    try:
        with open(args.profile) as file:
            profile = json.load(file)
        lib = _libseccomp()
        context = build_filter(lib, profile)
    except (OSError, ValueError, KeyError) as error:
        print(f"run_with_profile: {error}", file=sys.stderr)
        return 2
    if args.user is not None and os.getuid() == 0:
        os.setgroups([])
        os.setgid(args.user)
        os.setuid(args.user)
    if lib.seccomp_load(context) != 0:
        print("run_with_profile: the kernel refused the filter", file=sys.stderr)
        return 2
    try:
        os.execvp(args.command[0], args.command)
    except OSError as error:
        print(f"run_with_profile: {args.command[0]}: {error.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main())
