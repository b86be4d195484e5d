"""Per-shard deadlines the product enforces itself, for tasks that run on threads.

Celery enforces ``soft_time_limit``/``time_limit`` only in its prefork pool (a signal in the
child, then killing it); the threads pool ignores both. Shards run on threads (docs/design/
engine.md, "Threads, not a process per shard"), so a task body runs inside :func:`shard_deadline`:

- **soft** deadline: :class:`schemas.errors.ShardDeadlineExceeded` is raised *inside the task's
  thread* (``PyThreadState_SetAsyncExc``), at its next Python instruction. The pipeline's
  handlers end the shard ``executor-failed`` / ``grader-dispatch-failed`` with that message, the
  workspace and the sandbox's processes are cleaned up by their own ``finally`` blocks, exactly
  as Celery's ``SoftTimeLimitExceeded`` did. A thread blocked in a C call (a socket read) gets it
  when the call returns: every such call in a shard has its own timeout.
- **hard** deadline: a thread that is still inside the body (stuck in C past its timeout, or
  swallowing the exception) is abandoned. ``on_hard`` runs: the caller expires the shard's lease
  so the reaper re-queues it on its next pass (with the attempt counter, as for a worker that
  died), and every later write of the stuck thread is refused by its lost lease. The thread
  itself cannot be killed; its slot stays busy until it returns.

The soft exception is delivered only while the body runs: leaving the block disarms it, and one
still pending at that moment is withdrawn, so it never surfaces in Celery's own code.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import structlog

from schemas.errors import ShardDeadlineExceeded
from worker.app import time_limits
from worker.context import Context, with_redis_retry

log = structlog.get_logger("skill_eval.worker")


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    """Schedule ``exc`` in thread ``thread_id``; None withdraws a pending one (a NULL pointer, not Py_None)."""
    arg = ctypes.py_object(exc) if exc is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), arg)


class _Deadline:
    """The armed/fired state of one block, shared with its timer threads under one lock."""

    def __init__(self, thread_id: int, what: str, on_hard: Callable[[], None] | None) -> None:
        self.thread_id = thread_id
        self.what = what
        self.on_hard = on_hard
        self.lock = threading.Lock()
        self.armed = True
        self.fired = False

    def soft(self, seconds: float) -> None:
        with self.lock:
            if not self.armed:
                return
            self.fired = True
            log.warning("shard deadline passed; interrupting it", what=self.what, soft_s=seconds)
            _raise_in(self.thread_id, ShardDeadlineExceeded)

    def hard(self, seconds: float) -> None:
        with self.lock:
            if not self.armed:
                return
        log.error("shard still running past its hard deadline; abandoning it", what=self.what, hard_s=seconds)
        if self.on_hard is not None:
            try:
                self.on_hard()
            except Exception as exc:  # Redis down: the lease lapses on its own once the heartbeat stops
                log.warning("could not expire the abandoned shard's lease", what=self.what, error=str(exc))

    def disarm(self) -> None:
        with self.lock:
            self.armed = False
            if self.fired:
                _raise_in(self.thread_id, None)  # not delivered yet: withdraw it


@contextmanager
def shard_deadline(
    soft_s: float, hard_s: float, *, what: str, on_hard: Callable[[], None] | None = None
) -> Iterator[None]:
    """Run the block under a soft and a hard deadline (seconds from now); see the module docstring."""
    if hard_s < soft_s:
        raise ValueError(f"hard deadline {hard_s}s is before the soft one {soft_s}s")
    deadline = _Deadline(threading.get_ident(), what, on_hard)
    timers = [
        threading.Timer(soft_s, deadline.soft, args=(soft_s,)),
        threading.Timer(hard_s, deadline.hard, args=(hard_s,)),
    ]
    for timer in timers:
        timer.daemon = True
        timer.name = f"deadline-{what}"
        timer.start()
    try:
        yield
    finally:
        deadline.disarm()
        for timer in timers:
            timer.cancel()


@contextmanager
def within_deadline(ctx: Context, kind: str, run_id: str, shard_id: str, token: str) -> Iterator[None]:
    """The body of an ``execute`` or ``grade`` task holding the lease ``token``, under its run's deadlines."""
    soft, hard = time_limits(ctx.manifest(run_id), kind)

    def abandon() -> None:
        with_redis_retry(lambda: ctx.state.expire_lease(run_id, shard_id, token))

    with shard_deadline(soft, hard, what=f"{kind} {shard_id}", on_hard=abandon):
        yield
