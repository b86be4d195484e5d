"""The embedded one-host cluster: a private redis-server and one Celery worker process.

With no broker given, ``skill-eval run`` starts this, runs the same tasks through the same
queues as a cluster would, and stops everything afterwards. One code path.

The worker runs its shards on threads (engine/node.py): a shard's time is spent waiting
on model calls and sandbox subprocesses, so N shards in flight need N threads, not N
processes each importing litellm (~4 s and ~220 MB apiece). The worker imports the heavy
modules in the background as it starts (worker/tasks.py), while Celery connects; from the
command line it was usually started before the cluster, as the command began (producer/launch/prestart.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType

from engine.node import WorkerNode
from engine.redis_server import RedisServer, die_with_parent
from engine.settings import Settings
from producer.launch import prestart
from schemas.constants import ALL_QUEUES

THREADS_PER_PROCESS = 16
"""Shards in flight one worker process serves before the cluster adds another (up to the host's
cores): every shard's bookkeeping holds one interpreter's lock, so one process tops out near
20 shards a second with an instant model, whatever the cores (docs/design/profile.md)."""


def plan_processes(workers: int, processes: int | None, cores: int | None) -> list[int]:
    """Threads of each worker process for ``workers`` shards in flight, as even as can be.

    ``processes`` None: one per THREADS_PER_PROCESS shards, at most one per core.
    """
    if processes is None:
        processes = min(max(1, cores or 1), -(-workers // THREADS_PER_PROCESS))
    processes = max(1, min(processes, workers))
    return [workers // processes + (1 if i < workers % processes else 0) for i in range(processes)]


def _sweep_group(pgid: int, timeout_s: float = 5.0) -> None:
    """Kill what is left of a worker's process group and wait until it is gone.

    The worker's own exit does not end its group: a child it started may outlive it for a
    moment (or for good, if it ignored the worker's signals). The command must not return
    while anything it started still runs.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except PermissionError:  # the group id was reused by someone else's process
            return
        if time.monotonic() > deadline:
            return
        time.sleep(0.02)


class EmbeddedCluster:
    """Redis + Celery worker processes running ``workers`` shards at once on threads, on this machine.

    One process unless ``workers`` or ``settings.worker_processes`` asks for more
    (:func:`plan_processes`). The first is started at once (or taken from the command's start,
    producer/launch/prestart.py); the others by :meth:`grow`, once the run's checks have passed, so
    their imports do not compete with the first model call.
    """

    def __init__(self, settings: Settings, workers: int = 2, log_path: Path | None = None) -> None:
        self.base = settings
        self.workers = workers
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        self.threads = plan_processes(workers, settings.worker_processes, cores)
        self.tmp = Path(tempfile.mkdtemp(prefix="skill-eval-cluster-"))
        # An append-only file: a Redis killed and restarted mid-run comes back with the run's state.
        # Tied to this process: the CLI starts the cluster from its main thread and must never orphan it.
        self.redis = RedisServer(
            workdir=self.tmp / "redis", appendonly=True, tied=threading.current_thread() is threading.main_thread()
        )
        self.log_path = log_path or self.tmp / "worker.log"
        self.procs: list[prestart.WorkerProcess] = []
        self._env: dict[str, str] = {}

    @property
    def settings(self) -> Settings:
        return self.base.model_copy(update={"broker_url": self.redis.url})

    def start(self) -> EmbeddedCluster:
        (self.tmp / "redis").mkdir(parents=True, exist_ok=True)
        self.redis.start()
        self._env = {
            **os.environ,
            "SKILL_EVAL_BROKER_URL": self.redis.url,
            "SKILL_EVAL_STORE": self.base.store,
            "SKILL_EVAL_WORKDIR": os.path.abspath(self.base.workdir),  # the worker runs elsewhere
            "SKILL_EVAL_SANDBOX": self.base.sandbox.value,
            "SKILL_EVAL_LEASE_TTL_S": str(self.base.lease_ttl_s),
            "SKILL_EVAL_REAPER_PERIOD_S": str(self.base.reaper_period_s),
        }
        node = self._node(0)
        # The command line may have started this worker already, before its own imports.
        proc = prestart.WAITING.take(node, self._env, self.log_path, cwd=self.tmp)
        self.procs.append(proc if proc is not None else self._spawn(node))
        return self

    def grow(self) -> None:
        """Start the cluster's other worker processes, if it has more than one."""
        while len(self.procs) < len(self.threads):
            self.procs.append(self._spawn(self._node(len(self.procs))))

    def _node(self, index: int) -> WorkerNode:
        suffix = f".{index}" if index else ""
        return WorkerNode(ALL_QUEUES, self.threads[index], f"embedded-{os.getpid()}{suffix}@localhost")

    def _spawn(self, node: WorkerNode) -> subprocess.Popen[bytes]:
        with self.log_path.open("ab") as log:
            # Its own session, so stopping it can signal the whole pool and nothing is left running.
            return subprocess.Popen(
                node.command(),
                env=self._env,
                cwd=self.tmp,  # never the command's folder, which may be the repo under evaluation
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent if self.redis.tied else None,
            )

    def alive(self) -> bool:
        """Whether a worker process is still running (the others' shards come back by their leases)."""
        return any(p.poll() is None for p in self.procs)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout_s: float = 20.0, *, drained: bool = False) -> None:
        """Stop the workers, then Redis, and remove the cluster's folder.

        ``drained``: the run is over (reduced, or nothing was ever sent) and no shard is running:
        the workers hold nothing that is not already in Redis or the store, both private to this
        run and about to go, so they are killed outright (SIGKILL). Even Celery's cold shutdown
        spent over a second here stopping the consumer and the pool, on every run's exit.
        Otherwise a warm shutdown (SIGTERM) lets running tasks end, for ``timeout_s`` at most.
        Redis, drained, is killed too: its shutdown (20 ms and more of every exit) would only
        tidy data about to be removed with the folder.
        """
        running = [p for p in self.procs if p.poll() is None]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL if drained else signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in running:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        for proc in running:
            _sweep_group(proc.pid)
        if drained:
            self.redis.kill()
        else:
            self.redis.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop(drained=e is None)  # leaving normally means the run was waited for and reduced
