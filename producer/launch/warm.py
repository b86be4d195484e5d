"""A warm spare: a worker process left imported by one embedded run for the next one to take.

On a two-core machine a worker process spends most of its first seconds importing (litellm
alone is 4-8 s of CPU), and a run's first model call waits for that. Starting the process with
the command (producer/launch/prestart.py) hides the command line's own start behind it, not the
import. So an embedded ``run`` that ends leaves one more worker process behind, detached: a
*spare* that imports the heavy modules, then waits on a private unix socket. The next run
started with the same code and the same environment claims it as its command begins and hands
it the cluster's order exactly as it would a process it had spawned; the spare becomes that
run's worker and serves no other.

Rules that keep it as safe and as exact as a fresh process:

* **One run per spare.** A spare is taken once and becomes that run's worker; whatever a
  hostile repo or agent did to it goes away with the run. The next spare is a new process.
* **Same code, same environment.** The socket's name is a hash of the interpreter, the
  project's source files (path, size, mtime), the installed packages' folders and the whole
  environment but for a few shell variables (``VOLATILE``): a change of any of them means
  another socket, so a spare is only ever taken by a command it is indistinguishable for.
* **Private.** The sockets live in ``$XDG_RUNTIME_DIR/skill-eval`` or, without it,
  ``<tmp>/skill-eval-<uid>``: a folder this user owns, not a symlink, mode 0700, or the
  spare is not used. Both ends check the other's uid (SO_PEERCRED), since the order carries
  the run's environment, provider keys included.
* **Tied to its command.** A claimed spare keeps the connection open and exits when it reads
  end-of-file, so a killed command (even SIGKILL) leaves no worker; an idle spare exits after
  ``SKILL_EVAL_WARM_IDLE_S`` (default 15 minutes). At most ``MAX_SPARES`` wait per user: leaving
  one retires the oldest of other keys.
* **Opt-in outside a terminal.** On by default only when the command runs on a terminal (an
  interactive user about to run again); ``SKILL_EVAL_WARM=1`` or ``0`` decides it anywhere. CI
  jobs and scripts get no process left behind unless they ask.

Standard library only (and ``engine.unix_socket``): the entry point claims the spare before any
heavy import.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from engine.unix_socket import peer_credentials, read_line
from schemas.constants import LITELLM_PRELOAD_ENV

WARM_ENV = "SKILL_EVAL_WARM"
IDLE_ENV = "SKILL_EVAL_WARM_IDLE_S"
DEFAULT_IDLE_S = 900.0
VOLATILE = frozenset({"_", "OLDPWD", "PWD", "SHLVL", IDLE_ENV})
"""Variables a shell changes between two commands without changing what a worker does
(a worker never runs in the command's folder, see producer/launch/prestart.py)."""
PRESTART_MODULE = "worker.prestart"
"""The module a worker started ahead of its cluster runs, by the command or as a spare (worker/prestart.py)."""
CODE_PACKAGES = ("engine", "harnesses", "prompts", "producer", "reducer", "schemas", "testkit", "worker")
MAX_SPARES = 2
"""Spares waiting in one user's folder at most (each holds about 250 MB): leaving one retires
the oldest of other keys beyond that (a code edit changes the key, so a developer's earlier
spares would otherwise wait out their idle time unused)."""
CLAIM_TIMEOUT_S = 2.0
"""How long a command waits for a spare to answer its claim before starting its own worker."""
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes


_YES = ("1", "true", "yes", "on")
_NO = ("0", "false", "no", "off")


def enabled(environ: Mapping[str, str], interactive: bool) -> bool:
    """Whether this command uses and leaves a spare: ``SKILL_EVAL_WARM`` if set, else ``interactive``.

    A value of either variable that does not fit means no spare: this runs before the command
    line, whose settings (engine/settings.py: ``warm``, ``warm_idle_s``) refuse it by name.
    """
    value = environ.get(WARM_ENV, "").strip().lower()
    if idle_seconds(environ) is None or (value and value not in _YES + _NO):
        return False
    return value in _YES if value else interactive


def idle_seconds(environ: Mapping[str, str]) -> float | None:
    """``SKILL_EVAL_WARM_IDLE_S`` (default 15 minutes); None when it is not a positive number."""
    try:
        idle = float(environ.get(IDLE_ENV, DEFAULT_IDLE_S))
    except ValueError:
        return None
    return max(1.0, idle) if 0 < idle < math.inf else None


def spare_key(environ: Mapping[str, str]) -> str:
    """The hash naming the spares this code and this environment may use (see the module docstring)."""
    digest = hashlib.sha256()
    digest.update(f"{sys.executable}\0{sys.version}\0".encode())
    root = Path(__file__).resolve().parents[2]  # producer/launch/warm.py -> the packages' folder
    for package in CODE_PACKAGES:
        for dirpath, dirnames, filenames in os.walk(root / package):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(dirpath, name)
                with contextlib.suppress(OSError):
                    st = os.stat(path)
                    digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    # An install or upgrade changes its site-packages folder's mtime. Only the interpreter's own
    # folders count: the script's or the working folder (sys.path[0]) changes with every file
    # a run writes there.
    prefixes = tuple({os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)})
    for entry in sorted({os.path.realpath(e) for e in sys.path if e}):
        if entry.startswith(prefixes):
            with contextlib.suppress(OSError):
                digest.update(f"{entry}\0{os.stat(entry).st_mtime_ns}\0".encode())
    for name in sorted(environ):
        if name not in VOLATILE:
            digest.update(f"{name}={environ[name]}\0".encode())
    return digest.hexdigest()[:24]


def spare_dir(environ: Mapping[str, str]) -> Path:
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "skill-eval"
    return Path(tempfile.gettempdir()) / f"skill-eval-{os.getuid()}"


def private_dir(folder: Path, *, create: bool) -> bool:
    """Whether ``folder`` is fit to hold spares' sockets: this user's own, not a symlink, mode 0700.

    Made (0700) when missing and ``create``; anything else found there is not used.
    """
    if create:
        with contextlib.suppress(OSError):  # there already, or its parent missing: judged below
            folder.mkdir(mode=0o700)
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077 == 0


def socket_path(environ: Mapping[str, str], key: str) -> Path | None:
    """Where the spare for ``key`` listens, or None when that path cannot hold a unix socket."""
    path = spare_dir(environ) / f"{key}.sock"
    return path if len(os.fsencode(path)) <= _MAX_SOCKET_PATH else None


class ClaimedSpare:
    """A spare this command has claimed: the connection its order goes down, and its process.

    Quacks like the ``subprocess.Popen`` of a spawned worker where ``EmbeddedCluster`` needs it
    (``pid``, ``poll``, ``wait``, ``kill``). It is not this process's child, so its exit is
    watched through a pidfd (no confusion with a later process given the same pid).
    """

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid
        self._pidfd = os.pidfd_open(pid)
        self.returncode: int | None = None

    def send_order(self, order: Mapping[str, object]) -> bool:
        """Hand the spare its worker's order; False when it is gone (the caller spawns one)."""
        try:
            self.sock.sendall(json.dumps(dict(order)).encode() + b"\n")
        except OSError:
            self.kill()
            return False
        return True

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self.returncode = -1  # not our child: its status is its parent's to read
            os.close(self._pidfd)
            self.sock.close()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(["spare", str(self.pid)], timeout or 0.0)
            select.select([self._pidfd], [], [], left)
        return -1

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        self.sock.close()


def claim(environ: Mapping[str, str]) -> ClaimedSpare | None:
    """Claim the waiting spare for this code and environment, or None when there is none fit to use."""
    path = socket_path(environ, spare_key(environ))
    if path is None or not private_dir(path.parent, create=False):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    pid: int | None = None
    try:
        sock.settimeout(CLAIM_TIMEOUT_S)
        sock.connect(os.fspath(path))
        pid, uid = peer_credentials(sock)
        if uid != os.getuid():
            raise OSError(f"the spare's socket {path} is held by uid {uid}")
        sock.sendall(b'{"claim": 1}\n')
        reply = json.loads(read_line(sock))
        if reply.get("pid") != pid:
            raise OSError(f"the process at {path} did not answer as a spare")
        sock.settimeout(None)
        return ClaimedSpare(sock, pid)
    except TimeoutError:
        # Listening but not answering (stopped, wedged): it would cost every later command the
        # same wait, and its lock keeps a new spare for this key from starting. Stop it, if it
        # is a spare at this very path (anything else of this user there is left alone).
        sock.close()
        if pid is not None:
            _stop_spare(pid, path)
        return None
    except (OSError, ValueError, AttributeError):
        sock.close()
        return None


def _stop_spare(pid: int, path: Path) -> None:
    """SIGKILL ``pid`` if it is the spare serving ``path``; through a pidfd, opened before the check,
    so a later process given the same pid is never the one signalled."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        if PRESTART_MODULE.encode() in argv and b"--spare" in argv and os.fsencode(path) in argv:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(fd)


def leave(environ: Mapping[str, str], *, lean: bool = False) -> subprocess.Popen[bytes] | None:
    """Start a spare for the next command, detached from this one; None when it cannot have one.

    ``lean``: this command's models all went straight over HTTP, so the next one's likely will
    too: the spare leaves litellm out while it waits (about 150 MB less), and imports it when
    a command that may need it claims it (worker/warmup.py: import_litellm_if_wanted).
    """
    path = socket_path(environ, spare_key(environ))
    if path is None or not private_dir(path.parent, create=True):
        return None
    others = sorted((p for p in path.parent.glob("*.sock") if p != path), key=_mtime, reverse=True)
    for old in others[MAX_SPARES - 1 :]:
        _retire(old)
    idle = idle_seconds(environ) or DEFAULT_IDLE_S
    return subprocess.Popen(
        [sys.executable, "-P", "-m", PRESTART_MODULE, "--spare", os.fspath(path), str(idle)],
        cwd="/",  # not the command's folder: see producer/launch/prestart.py
        env={**environ, LITELLM_PRELOAD_ENV: "0"} if lean else dict(environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _retire(path: Path) -> None:
    """Ask the spare listening on ``path`` to exit (nothing when none of this user answers)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(CLAIM_TIMEOUT_S)
        sock.connect(os.fspath(path))
        if peer_credentials(sock)[1] == os.getuid():
            sock.sendall(b'{"retire": 1}\n')
