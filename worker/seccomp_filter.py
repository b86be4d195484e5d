"""A seccomp program that denies process tampering, generated with libseccomp for bwrap's ``--seccomp``.

Inside a harness sandbox the agent's commands and the harness itself run as one uid, so
without this an agent could ``ptrace`` its harness (rewrite what it reports) or write its
memory with ``process_vm_writev``. The program answers ``EPERM`` to ``ptrace``,
``process_vm_readv``, ``process_vm_writev`` and ``pidfd_getfd`` (stealing another process's
file descriptors) and allows everything else. It is compiled once per process by the
system's libseccomp (``libseccomp.so.2``, through ctypes) into a BPF program file that bwrap
loads from a file descriptor.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import errno
import functools
import os
import tempfile

from schemas.errors import NoSandbox

DENIED_SYSCALLS = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd")
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_ERRNO = 0x00050000


def _libseccomp() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise NoSandbox(f"libseccomp is not installed (Debian package libseccomp2): {exc}") from exc
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


@functools.cache
def seccomp_program() -> str:
    """Path of the compiled BPF program (made once per process; raises NoSandbox without libseccomp)."""
    lib = _libseccomp()
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        raise NoSandbox("libseccomp: seccomp_init failed")
    try:
        for name in DENIED_SYSCALLS:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue  # not a syscall on this architecture
            if lib.seccomp_rule_add(ctx, _SCMP_ACT_ERRNO | errno.EPERM, number, 0) != 0:
                raise NoSandbox(f"libseccomp: cannot add the rule denying {name}")
        fd, path = tempfile.mkstemp(prefix="skill-eval-seccomp-", suffix=".bpf")
        try:
            if lib.seccomp_export_bpf(ctx, fd) != 0:
                raise NoSandbox("libseccomp: cannot export the BPF program")
        finally:
            os.close(fd)
        atexit.register(_remove, path)
        return path
    finally:
        lib.seccomp_release(ctx)
