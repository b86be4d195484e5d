"""How a sandboxed command is launched, limited, watched and killed (mechanics of worker.sandbox).

The argv is ``bwrap <namespaces and mounts> -- prlimit <limits> -- [setpriv <throwaway uid>
--] bash -c <command>``. The rlimits are applied *inside* the namespaces, after bwrap
has created them: a user namespace records its creator's RLIMIT_NPROC as the ceiling for
all of the creator's processes on the host, so setting the limit before bwrap would make
a laptop user's own desktop count against the sandbox's 256 processes.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, cast

from engine.gitcmd import GIT_IDENTITY
from worker.output import OutputBuffer
from worker.sandbox_spec import INNER_HOME, INNER_ROOT, CommandResult, SandboxLimits
from worker.workspace_quota import WORKSPACE_LIMIT, QuotaWatch

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# System folders mounted read-only; each is a folder or a symlink (merged-/usr) on the host.
_SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
_MB = 1024 * 1024

# errno texts by which a command shows it ran into a limit that kills nobody by itself.
_PROCESS_HINTS = ("fork: Resource temporarily unavailable", "fork: retry", "Cannot fork", "can't fork")
_MEMORY_HINTS = ("Cannot allocate memory", "MemoryError", "std::bad_alloc", "out of memory")


def sandbox_env(*, home: str, tmp: str) -> dict[str, str]:
    """The complete environment of a sandboxed command: an allowlist, nothing inherited."""
    return {
        "PATH": _PATH,
        "HOME": home,
        "TMPDIR": tmp,
        "USER": "agent",
        "LOGNAME": "agent",
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        **GIT_IDENTITY,
    }


def inner_argv(command: str, limits: SandboxLimits, *, uid: int | None, unconfined: bool = False) -> list[str]:
    """``prlimit ... [setpriv ...] bash -c command``: limits first, then the uid drop, then the shell."""
    nproc = limits.processes
    if unconfined and uid is None:
        # Without a user namespace or a throwaway uid, RLIMIT_NPROC counts every process of
        # the worker's user on the host: allow the ones already running.
        nproc += _count_processes(os.getuid())
    argv = [
        "prlimit",
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",  # SIGXCPU at the soft limit, SIGKILL a second later
        f"--as={limits.memory_mb * _MB}",
        f"--nproc={nproc}",
        f"--fsize={limits.file_size_mb * _MB}",
        "--core=0",
        "--",
    ]
    if uid is not None:
        argv += [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--no-new-privs",
            "--",
        ]
    return [*argv, "bash", "-c", command]


def bwrap_argv(
    workspace: Path,
    limits: SandboxLimits,
    *,
    uid: int | None,
    inner: list[str],
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """The bwrap command line confining ``inner`` (see docs/design/sandbox.md for each choice)."""
    argv = [
        shutil.which("bwrap") or "bwrap",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    if uid is None:
        argv.append("--unshare-user")  # unprivileged bwrap needs it; it also counts NPROC per sandbox
    else:
        # Root: keep only what setpriv needs to drop to the throwaway uid, which clears them.
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
    for path in _SYSTEM_PATHS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    tmpfs_bytes = str(limits.tmpfs_mb * _MB)
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--perms", "1777", "--size", tmpfs_bytes, "--tmpfs", "/tmp"]
    argv += ["--perms", "0777", "--size", tmpfs_bytes, "--tmpfs", INNER_HOME]
    argv += ["--bind", str(workspace), INNER_ROOT, "--chdir", INNER_ROOT]
    for name, value in (env or {}).items():
        argv += ["--setenv", name, value]
    return [*argv, "--", *inner]


def _count_processes(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                continue
    return count


def reap_uid(uid: int, *, wait_s: float = 2.0) -> None:
    """Make sure no process of the throwaway ``uid`` is left, killing stragglers, waiting ``wait_s`` at most.

    Killed processes keep counting against RLIMIT_NPROC until the kernel has reaped them
    (bwrap reports the exit before its PID namespace is fully torn down), so without this
    wait the next command of the same sandbox could be refused a fork by the last one's
    dying fork bomb.
    """
    if not _count_processes(uid):
        return
    subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "kill", "-KILL", "-1"],
        capture_output=True,
        env={"PATH": _PATH},
        check=False,
    )
    deadline = time.monotonic() + wait_s
    while _count_processes(uid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _which_limit(code: int | None, timed_out: bool, seen: set[str]) -> str | None:
    if seen & set(_PROCESS_HINTS):
        # A fork refused by RLIMIT_NPROC; also when the shell retried and went on, or the
        # wall clock ended a contained fork bomb: the process limit is what was hit.
        return "processes"
    if timed_out:
        return "timeout"
    if code in (128 + signal.SIGXCPU, -signal.SIGXCPU):
        return "cpu"
    if code in (128 + signal.SIGXFSZ, -signal.SIGXFSZ) or "File size limit exceeded" in seen:
        return "file-size"
    if "CPU time limit exceeded" in seen:
        return "cpu"
    if code == 0:
        return None
    if seen & set(_MEMORY_HINTS):
        return "memory"
    return None


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _pump(
    proc: subprocess.Popen[bytes],
    buffer: OutputBuffer,
    *,
    deadline: float,
    out: IO[bytes] | None = None,
    allowance: Callable[[], float] | None = None,
    stop: threading.Event | None = None,
) -> bool:
    """Feed ``proc``'s output (or ``out``) into ``buffer`` until EOF or ``deadline`` (later by
    ``allowance()``, read again at least every 0.1 s) or until ``stop`` is set; reap it. True on timeout."""
    reader = out or proc.stdout
    assert reader is not None
    fd = reader.fileno()
    timed_out = False
    drain_until: float | None = None
    started_deadline = deadline
    try:
        while True:
            now = time.monotonic()
            if allowance is not None and drain_until is None:
                deadline = max(deadline, started_deadline + allowance())
            if drain_until is None and proc.poll() is not None:
                # The command is done; a background child may still hold the pipe open
                # (only possible without a PID namespace): kill the group, drain briefly.
                _killpg(proc.pid)
                drain_until = now + 0.5
            if now >= (drain_until or deadline):
                timed_out = drain_until is None
                break
            if stop is not None and stop.is_set():
                break  # killed below, with every process of its group
            ready, _, _ = select.select([fd], [], [], min((drain_until or deadline) - now, 0.1))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            buffer.feed(chunk)
    finally:
        if timed_out or proc.poll() is None:
            _killpg(proc.pid)
        proc.wait()
        reader.close()
    return timed_out


def execute(
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None,
    stdin: str | None,
    timeout_s: float,
    limits: SandboxLimits,
    pass_fds: tuple[int, ...] = (),
    socket_output: bool = False,
    allowance: Callable[[], float] | None = None,
    watch: tuple[Path, ...] = (),
) -> CommandResult:
    """Run ``argv`` in its own process group, read its output incrementally, enforce the wall clock.

    On timeout the whole process group is killed (for bwrap this kills the PID namespace's
    init, and with it every process in the sandbox). Never raises for the command's failure.
    ``pass_fds`` stay open in the child (bwrap's ``--seccomp FD``). With ``socket_output`` the
    command writes into a socket instead of a pipe: a socket cannot be reopened through
    ``/proc/<pid>/fd/1``, so nothing the command starts can write into its output that way.
    ``allowance``: seconds the wall clock is extended by, read as it runs (a harness's model
    proxy: what its requests waited on the fleet, which is not the agent's time).
    ``watch``: the workspace (and any folder counted with it), sampled while the command runs;
    past its quota the command is killed and its ``limit`` is ``workspace-quota``
    (:class:`~worker.workspace_quota.QuotaWatch`).
    """
    started = time.monotonic()
    buffer = OutputBuffer(
        limits.output_chars,
        watch=("CPU time limit exceeded", "File size limit exceeded", *_PROCESS_HINTS, *_MEMORY_HINTS),
    )
    with contextlib.ExitStack() as stack:
        stdin_src: int | IO[bytes] = subprocess.DEVNULL
        if stdin is not None:
            stdin_file = stack.enter_context(tempfile.TemporaryFile())
            stdin_file.write(stdin.encode())
            stdin_file.seek(0)
            stdin_src = stdin_file
        out_src: int = subprocess.PIPE
        reader: IO[bytes] | None = None
        if socket_output:
            ours, theirs = socket.socketpair()
            stack.callback(theirs.close)
            reader = cast(IO[bytes], ours.makefile("rb", buffering=0))
            ours.close()  # the file object holds its own reference to the socket
            out_src = theirs.fileno()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=stdin_src,
                stdout=out_src,
                stderr=subprocess.STDOUT,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
                pass_fds=pass_fds,
            )
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the command
            if reader is not None:
                reader.close()
            return CommandResult(output=f"sandbox could not start the command: {exc}", exit_code=None)
        if socket_output:
            theirs.close()  # only the child holds the writing end: EOF when it (and its children) exit
        quota = stack.enter_context(QuotaWatch(watch, limits)) if watch else None
        stop = quota.tripped if quota is not None else None
        timed_out = _pump(proc, buffer, deadline=started + timeout_s, out=reader, allowance=allowance, stop=stop)
        stopped = stop is not None and stop.is_set() and not timed_out
    code = None if timed_out or stopped else proc.returncode
    output, truncated = buffer.render()
    limit = WORKSPACE_LIMIT if stopped else _which_limit(code, timed_out, buffer.seen)
    if limit in ("cpu", "file-size") and code is not None and code > 128:
        code = None  # killed by the limit's signal, not an exit of its own
    return CommandResult(
        output=output,
        exit_code=code,
        limit=limit,
        truncated=truncated,
        duration_s=time.monotonic() - started,
    )
