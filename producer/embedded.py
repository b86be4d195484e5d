"""The embedded one-host cluster: a private redis-server and one Celery worker process.

With no broker given, ``skill-eval run`` starts this, runs the same tasks through the same
queues as a cluster would, and stops everything afterwards. One code path.

The worker runs its shards on threads (``-P threads -c N``): a shard's time is spent waiting
on model calls and sandbox subprocesses, so N shards in flight need N threads, not N
processes each importing litellm (~4 s and ~220 MB apiece). The worker imports the heavy
modules in the background as it starts (worker/tasks.py), while Celery connects; from the
command line it was usually started before the cluster, as the command began (producer/prestart.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType

from engine.redis_server import RedisServer, die_with_parent
from engine.settings import Settings
from producer import prestart
from schemas.constants import ALL_QUEUES, CONSUME_ORDER

CELERY = (sys.executable, "-m", "celery")
"""How a worker command line starts; what follows is Celery's own arguments."""


def worker_command(queues: str, concurrency: int, name: str, loglevel: str = "WARNING") -> list[str]:
    """The ``celery worker`` command line used by the embedded cluster and ``skill-eval worker``.

    ``concurrency`` is shards in flight: threads of one process. Prefetch is multiplier x
    concurrency, so with a multiplier of one the node reserves exactly the messages it runs.
    The queues are listed in CONSUME_ORDER, the order the node takes messages in.
    """
    rank = {q: i for i, q in enumerate(CONSUME_ORDER)}
    queues = ",".join(sorted(queues.split(","), key=lambda q: rank.get(q, len(rank))))
    return [
        *CELERY,
        "-A",
        "worker.tasks",
        "worker",
        "-Q",
        queues,
        "-c",
        str(concurrency),
        "-P",
        "threads",
        "-n",
        name,
        "--prefetch-multiplier",
        "1",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "-l",
        loglevel,
    ]


class EmbeddedCluster:
    """Redis + one Celery worker node running ``workers`` shards at once on threads, on this machine."""

    def __init__(self, settings: Settings, workers: int = 2, log_path: Path | None = None) -> None:
        self.base = settings
        self.workers = workers
        self.tmp = Path(tempfile.mkdtemp(prefix="skill-eval-cluster-"))
        # An append-only file: a Redis killed and restarted mid-run comes back with the run's state.
        # Tied to this process: the CLI starts the cluster from its main thread and must never orphan it.
        self.redis = RedisServer(
            workdir=self.tmp / "redis", appendonly=True, tied=threading.current_thread() is threading.main_thread()
        )
        self.log_path = log_path or self.tmp / "worker.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def settings(self) -> Settings:
        return self.base.model_copy(update={"broker_url": self.redis.url})

    def start(self) -> EmbeddedCluster:
        (self.tmp / "redis").mkdir(parents=True, exist_ok=True)
        self.redis.start()
        env = {
            **os.environ,
            "SKILL_EVAL_BROKER_URL": self.redis.url,
            "SKILL_EVAL_STORE": self.base.store,
            "SKILL_EVAL_WORKDIR": str(self.base.workdir),
            "SKILL_EVAL_SANDBOX": self.base.sandbox.value,
            "SKILL_EVAL_LEASE_TTL_S": str(self.base.lease_ttl_s),
            "SKILL_EVAL_REAPER_PERIOD_S": str(self.base.reaper_period_s),
        }
        cmd = worker_command(",".join(ALL_QUEUES), self.workers, f"embedded-{os.getpid()}@localhost")
        # The command line may have started this worker already, before its own imports.
        self.proc = prestart.take(cmd[len(CELERY) :], env, self.log_path)
        if self.proc is not None:
            return self
        log = self.log_path.open("ab")
        # Its own session, so stopping it can signal the whole pool and nothing is left running.
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent if self.redis.tied else None,
        )
        log.close()
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout_s: float = 20.0, *, drained: bool = False) -> None:
        """Stop the worker, then Redis, and remove the cluster's folder.

        ``drained``: the run is over (reduced, or nothing was ever sent) and no shard is running:
        the worker holds nothing that is not already in Redis or the store, both private to this
        run and about to go, so it is killed outright (SIGKILL). Even Celery's cold shutdown spent
        over a second here stopping the consumer and the pool, on every run's exit. Otherwise a
        warm shutdown (SIGTERM) lets running tasks end, for ``timeout_s`` at most.
        """
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL if drained else signal.SIGTERM)
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        self.redis.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop(drained=e is None)  # leaving normally means the run was waited for and reduced
