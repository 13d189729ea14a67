"""Runs a program that can open no network socket, within bounds:
`python -I -S offline.py [--address-space=BYTES] [--cpu-seconds=N] [--niceness=N] [--read=PATH]
[--write=PATH] [--] PROGRAM ARGS...`.

kustomize fetches any file or base named by a URL, and Go's HTTP client never sends a
loopback address through a proxy, so proxy settings that lead nowhere still let a
repository read the daemon's own /metrics or a `kubectl proxy` on 127.0.0.1. This wrapper
closes the network in the kernel instead: it installs a seccomp filter under which
`socket(2)` (and io_uring, which can open sockets too) fails with EACCES, then executes the
program, which inherits the filter and can never lift it. Nothing else changes for it.

The bounds are rlimits the program inherits: its address space (RLIMIT_AS: an allocation
past it fails, and Go's runtime exits "out of memory") and its processor time (RLIMIT_CPU:
the kernel kills it). No memory cgroup is writable in the shipped pod, so the address space
is the bound a render can be given; Go reserves about 780 MiB of it at start (measured for
helm 4.3 and kubectl 1.34), which the bound must leave room for.

It runs as a script of its own, started by path with the standard library only (no
site-packages), so it does no work in the daemon's threads and nothing of gitopsd's is
imported before the program starts. A machine it cannot protect (another architecture, no
seccomp) makes it exit 126 with a line saying why: no render then happens at all.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import stat
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
X32_SYSCALL_BIT = 0x40000000
# (audit architecture, socket, io_uring_setup) by machine: from the kernel's syscall tables
ARCHITECTURES = {
    "x86_64": (0xC000003E, 41, 425),
    "aarch64": (0xC00000B7, 198, 425),
}
# classic BPF: load a word of struct seccomp_data, jump if equal / greater or equal, return
LOAD, JUMP_EQUAL, JUMP_AT_LEAST, RETURN = 0x20, 0x15, 0x35, 0x06
NR, ARCH = 0, 4  # offsets of the syscall number and the architecture in seccomp_data


def instruction(code: int, k: int, if_true: int = 0, if_false: int = 0) -> bytes:
    return struct.pack("HBBI", code, if_true, if_false, k)


def no_sockets_filter(machine: str) -> bytes:
    """The filter program: another architecture is killed, socket and io_uring_setup fail
    with EACCES (so do the x32 calls of x86_64), everything else is allowed."""
    arch, socket_nr, io_uring_nr = ARCHITECTURES[machine]
    denied = SECCOMP_RET_ERRNO | errno.EACCES
    program = [
        instruction(LOAD, ARCH),
        instruction(JUMP_EQUAL, arch, 1, 0),
        instruction(RETURN, SECCOMP_RET_KILL_PROCESS),
        instruction(LOAD, NR),
        instruction(JUMP_AT_LEAST, X32_SYSCALL_BIT, 3, 0),
        instruction(JUMP_EQUAL, socket_nr, 2, 0),
        instruction(JUMP_EQUAL, io_uring_nr, 1, 0),
        instruction(RETURN, SECCOMP_RET_ALLOW),
        instruction(RETURN, denied),
    ]
    return b"".join(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def close_the_network() -> None:
    """Installs the filter on this process (and so on what it executes); raises OSError."""
    machine = platform.machine()
    if machine not in ARCHITECTURES:
        raise OSError(errno.ENOSYS, f"no network sandbox for the {machine} architecture")
    program = no_sockets_filter(machine)
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")


LIMITS = {"--address-space": resource.RLIMIT_AS, "--cpu-seconds": resource.RLIMIT_CPU}
FENCES = ("--read", "--write")
NICENESS = "--niceness"

# Landlock (linux/landlock.h): a fence on the file system any process may raise on itself.
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | 1 << 14 | 1 << 15  # truncate, ioctl_dev
RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
"""The file-system rights each ABI version knows (ABI 4 and 6 added none for files)."""


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall(number: int, *arguments: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(number, *arguments))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (too old, or not enabled)."""
    if platform.machine() not in ARCHITECTURES:  # the syscall numbers are x86-64's and arm64's
        return 0
    try:
        return _syscall(LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except OSError:
        return 0


def fence_the_file_system(program: str, reads: list[str], writes: list[str]) -> None:
    """Leaves this process (and what it executes) `program` to execute, `reads` to read and
    `writes` to read and change, each with what lies beneath: nothing else of the file
    system. Raises OSError; does nothing on a kernel without Landlock."""
    abi = landlock_abi()
    if abi == 0:
        return
    handled = RIGHTS_BY_ABI[max(version for version in RIGHTS_BY_ABI if version <= abi)]
    attributes = ctypes.c_uint64(handled)  # struct landlock_ruleset_attr, its first field
    ruleset = _syscall(
        LANDLOCK_CREATE_RULESET, ctypes.byref(attributes), ctypes.c_size_t(8), ctypes.c_uint32(0)
    )
    try:
        _allow(ruleset, program, (EXECUTE | READ_FILE) & handled)
        for path in reads:
            _allow(ruleset, path, (READ_FILE | READ_DIR) & handled)
        for path in writes:
            _allow(ruleset, path, handled)
        _syscall(LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: str, rights: int) -> None:
    descriptor = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not stat.S_ISDIR(os.fstat(descriptor).st_mode):
            rights &= FILE_RIGHTS  # a file's rule may name no directory right
        rule = _PathBeneath(rights, descriptor)
        _syscall(
            LANDLOCK_ADD_RULE,
            ctypes.c_int(ruleset),
            ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
    finally:
        os.close(descriptor)


def options(argv: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """The options before the program (each may repeat), and the program with its arguments."""
    found: dict[str, list[str]] = {option: [] for option in (*LIMITS, *FENCES, NICENESS)}
    at = 1
    while at < len(argv) and argv[at].startswith("--"):
        option, _, value = argv[at].partition("=")
        at += 1
        if option == "--":
            break
        found[option].append(value)
    return found, argv[at:]


def main(argv: list[str]) -> int:
    try:
        given, program = options(argv)
        for option, limit in LIMITS.items():
            for value in given[option]:
                resource.setrlimit(limit, (int(value), int(value)))
        for value in given[NICENESS]:
            os.nice(int(value))  # inherited by the program and every thread it starts
    except (KeyError, ValueError, OSError) as error:
        print(f"error: the bounds could not be set: {error!r}", file=sys.stderr)
        return 2
    if not program:
        usage = "offline.py [--address-space=N] [--cpu-seconds=N] [--niceness=N] [--read=PATH]"
        usage += " [--write=PATH]"
        print(f"usage: {usage} [--] PROGRAM [ARGUMENT...]", file=sys.stderr)
        return 2
    try:
        close_the_network()
    except OSError as error:
        print(f"error: the network sandbox could not be set up: {error}", file=sys.stderr)
        return 126
    if given["--read"] or given["--write"]:
        try:
            fence_the_file_system(program[0], given["--read"], given["--write"])
        except OSError as error:
            print(f"error: the file-system fence could not be set up: {error}", file=sys.stderr)
            return 126
    os.execv(program[0], program)  # noqa: S606 - the program asked for, by absolute path


if __name__ == "__main__":
    sys.exit(main(sys.argv))
