"""The sandbox every executor tool call runs in: bubblewrap, or explicitly none.

``open_sandbox(workspace, mode, limits)`` returns a :class:`Sandbox` whose ``run`` executes
one ``bash -c`` command confined to the workspace, with a scrubbed environment and
per-command limits, and never raises for the command's own failure. ``require_sandbox``
refuses up front (``NoSandbox``) when bubblewrap is missing or cannot work here.

Decisions (why each mount, why a throwaway uid, what is not protected) are in
docs/design/sandbox.md; the launch mechanics live in :mod:`worker.sandbox_exec`.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path
from typing import Protocol

from schemas.errors import NoSandbox
from schemas.status import SandboxMode
from worker.sandbox_exec import bwrap_argv, execute, inner_argv, reap_uid, sandbox_env
from worker.sandbox_spec import INNER_HOME, INNER_ROOT, CommandResult, SandboxLimits

__all__ = [
    "INNER_HOME",
    "INNER_ROOT",
    "CommandResult",
    "Sandbox",
    "SandboxLimits",
    "open_sandbox",
    "require_sandbox",
]


class Sandbox(Protocol):
    """Runs shell commands with the workspace as the only writable host path."""

    mode: SandboxMode
    workspace: Path
    """Host path of the workspace (inside the sandbox it is mounted at a fixed path)."""
    inner_root: str
    """Path of the workspace as commands inside the sandbox see it (e.g. ``/workspace``)."""
    limits: SandboxLimits
    """Per-command limits and the workspace's quota."""

    def run(self, command: str, *, timeout_s: float | None = None, stdin: str | None = None) -> CommandResult:
        """Run ``command`` with ``bash -c`` in the workspace; never raises for the command's own failure.

        The workspace is watched while it runs: past its quota the command is stopped with
        ``limit`` ``workspace-quota`` (:mod:`worker.workspace_quota`)."""
        ...


_HELPERS = ("prlimit", "setpriv")  # util-linux: per-command rlimits, dropping root to a throwaway uid


def _missing_helpers() -> list[str]:
    return [tool for tool in _HELPERS if shutil.which(tool) is None]


@functools.cache
def _probe_bwrap() -> str | None:
    """None when bwrap can build this module's sandbox here; otherwise why not (cached per process)."""
    with tempfile.TemporaryDirectory(prefix="skill-eval-probe-") as tmp:
        os.chmod(tmp, 0o711)  # as a workspace handed to a throwaway uid would be
        # The same namespaces and capabilities a real sandbox of this process uses.
        argv = bwrap_argv(Path(tmp), SandboxLimits(), uid=_choose_uid(), inner=["true"])
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={})
        except (OSError, subprocess.SubprocessError) as exc:
            return str(exc)
        return None if done.returncode == 0 else (done.stderr.strip() or f"exit code {done.returncode}")


def require_sandbox(mode: SandboxMode) -> None:
    """Raise ``NoSandbox`` unless ``mode`` can run here; ``NONE`` only needs util-linux's helpers.

    For ``BWRAP`` the message names the Debian package (``bubblewrap``) and the explicit
    opt-out (``--sandbox none``); a bwrap that is installed but cannot create namespaces
    (e.g. user namespaces disabled) is refused with bwrap's own words.
    """
    missing = _missing_helpers()
    if missing:
        raise NoSandbox(f"{', '.join(missing)} not found: install the Debian package util-linux")
    if mode is SandboxMode.NONE:
        return
    if shutil.which("bwrap") is None:
        raise NoSandbox(
            "bubblewrap (bwrap) is not installed: install the Debian package `bubblewrap` "
            "(apt-get install bubblewrap), or pass --sandbox none to run tool calls unconfined"
        )
    why = _probe_bwrap()
    if why is not None:
        raise NoSandbox(f"bubblewrap cannot create a sandbox on this host: {why}")


def _choose_uid() -> int | None:
    """A throwaway uid for this sandbox when the worker is root, else None (keep the worker's uid).

    Root is exempt from RLIMIT_NPROC, so a fork bomb run as root is never stopped; a fresh
    uid from a range no real account uses gives each sandbox its own process count.
    """
    if os.geteuid() != 0:
        return None
    import secrets

    start, count = throwaway_uid_range()
    return start + secrets.randbelow(count)


_THROWAWAY = (2_000_000_000, 100_000_000)


def throwaway_uid_range(uid_map: str | None = None) -> tuple[int, int]:
    """(first, count) of the uids a root worker's sandboxes are drawn from.

    ``2e9 + [0, 1e8)`` where this user namespace maps it (a host, a container sharing the host's
    uids). A user-namespaced container (Kubernetes ``hostUsers: false``) maps only 65,536 ids, so
    there: the upper half of its largest mapped range, below the 65534/65535 of ``nobody``
    (docs/design/deployment.md). ``uid_map`` is ``/proc/self/uid_map``'s text.
    """
    if uid_map is None:
        try:
            uid_map = Path("/proc/self/uid_map").read_text()
        except OSError:
            return _THROWAWAY
    ranges = [(int(f[0]), int(f[2])) for f in (line.split() for line in uid_map.splitlines()) if len(f) == 3]
    lo, n = _THROWAWAY
    if any(first <= lo and lo + n <= first + count for first, count in ranges):
        return _THROWAWAY
    first, count = max(ranges, key=lambda r: r[1], default=(0, 65536))
    end = min(first + count, 65534) if first < 65534 else first + count
    start = max(first + count // 2, 10002)
    return start, max(1, end - start)


def _chown_tree(root: Path, uid: int) -> None:
    os.lchown(root, uid, uid)
    # bwrap enters the folder before dropping to ``uid``, holding no capability by then.
    os.chmod(root, os.stat(root).st_mode | 0o711)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            os.lchown(os.path.join(dirpath, name), uid, uid)


class BwrapSandbox:
    """Bubblewrap: read-only system, the workspace at ``/workspace`` the only writable host path."""

    mode = SandboxMode.BWRAP
    inner_root = INNER_ROOT

    def __init__(self, workspace: Path, limits: SandboxLimits) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.limits = limits
        self.uid = _choose_uid()
        if self.uid is not None:
            _chown_tree(self.workspace, self.uid)

    def run(self, command: str, *, timeout_s: float | None = None, stdin: str | None = None) -> CommandResult:
        env = sandbox_env(home=INNER_HOME, tmp="/tmp")
        inner = inner_argv(command, self.limits, uid=self.uid)
        argv = bwrap_argv(self.workspace, self.limits, uid=self.uid, inner=inner, env=env)
        return self.execute(argv, env, timeout_s, stdin)

    def execute(
        self, argv: list[str], env: dict[str, str], timeout_s: float | None, stdin: str | None
    ) -> CommandResult:
        """Run a bwrap ``argv`` built for this sandbox; every process its uid left is reaped after."""
        timeout = self.limits.timeout_s if timeout_s is None else timeout_s
        try:
            return execute(
                argv, env=env, cwd=None, stdin=stdin, timeout_s=timeout, limits=self.limits, watch=(self.workspace,)
            )
        finally:
            if self.uid is not None:
                reap_uid(self.uid)


class UnconfinedSandbox:
    """``--sandbox none``: same limits, scrubbed environment and private HOME/TMPDIR, but no namespaces.

    Only for users who asked for it explicitly: the command can read and write anything the
    (throwaway, when the worker is root) uid can, and reach the network.
    """

    mode = SandboxMode.NONE

    def __init__(self, workspace: Path, limits: SandboxLimits) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.inner_root = str(self.workspace)
        self.limits = limits
        self.uid = _choose_uid()
        self._private = Path(tempfile.mkdtemp(prefix="skill-eval-none-"))
        (self._private / "home").mkdir()
        (self._private / "tmp").mkdir()
        if self.uid is not None:
            _chown_tree(self.workspace, self.uid)
            _chown_tree(self._private, self.uid)
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._private, True)

    def close(self) -> None:
        """Remove the private HOME and TMPDIR (also done when the object is collected)."""
        self._cleanup()

    def run(self, command: str, *, timeout_s: float | None = None, stdin: str | None = None) -> CommandResult:
        env = sandbox_env(home=str(self._private / "home"), tmp=str(self._private / "tmp"))
        argv = inner_argv(command, self.limits, uid=self.uid, unconfined=True)
        timeout = self.limits.timeout_s if timeout_s is None else timeout_s
        try:
            return execute(
                argv,
                env=env,
                cwd=self.workspace,
                stdin=stdin,
                timeout_s=timeout,
                limits=self.limits,
                watch=(self.workspace,),
            )
        finally:
            if self.uid is not None:
                reap_uid(self.uid)  # also background processes that left the process group


def open_sandbox(workspace: Path, mode: SandboxMode, limits: SandboxLimits = SandboxLimits()) -> Sandbox:
    """Return a sandbox for ``workspace`` in ``mode``; raise ``NoSandbox`` when it cannot run here.

    When the worker is root the workspace is handed to the sandbox's throwaway uid, so every
    later write into it must go through ``Sandbox.run``.
    """
    require_sandbox(mode)
    if not Path(workspace).is_dir():
        raise NoSandbox(f"workspace {workspace} is not a folder")
    if mode is SandboxMode.BWRAP:
        return BwrapSandbox(workspace, limits)
    return UnconfinedSandbox(workspace, limits)
