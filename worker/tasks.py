"""Celery tasks: thin wrappers over worker.pipeline, plus the lease reaper and worker start-up."""

from __future__ import annotations

import logging
import sys
import threading

import structlog
from celery.signals import worker_init, worker_process_init, worker_ready, worker_shutting_down

from schemas.constants import KEY_PREFIX
from schemas.status import ShardState
from worker import pipeline
from worker.app import TASK_EXECUTE, TASK_GRADE, TASK_NAMES, TASK_REDUCE, app, time_limits
from worker.context import context, reset_context

log = structlog.get_logger("skill_eval.worker")


def send(kind: str, run_id: str, shard_id: str | None) -> None:
    """Enqueue a follow-up task carrying ids only."""
    args = [run_id] if shard_id is None else [run_id, shard_id]
    soft, hard = time_limits(context().manifest(run_id), kind)
    app.send_task(TASK_NAMES[kind], args=args, queue=kind, soft_time_limit=soft, time_limit=hard)


@app.task(name=TASK_EXECUTE)
def execute(run_id: str, shard_id: str) -> None:
    structlog.contextvars.bind_contextvars(run_id=run_id, shard_id=shard_id)
    pipeline.execute_shard(context(), send, run_id, shard_id)


@app.task(name=TASK_GRADE)
def grade(run_id: str, shard_id: str) -> None:
    structlog.contextvars.bind_contextvars(run_id=run_id, shard_id=shard_id)
    pipeline.grade_shard(context(), send, run_id, shard_id)


@app.task(name=TASK_REDUCE)
def reduce(run_id: str) -> None:
    structlog.contextvars.bind_contextvars(run_id=run_id, shard_id=None)
    pipeline.reduce_run(context(), run_id)


def configure_logging(level: int = logging.INFO) -> None:
    """structlog JSON lines on stderr, with run and shard ids bound per task."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # The real stderr: inside a worker Celery replaces sys.stderr with a proxy that would wrap
        # every JSON line in its own "[time: WARNING/Process]" prefix.
        logger_factory=structlog.PrintLoggerFactory(sys.__stderr__),
        cache_logger_on_first_use=True,
    )


_redis_run_id: str | None = None
"""The Redis server's INFO run_id seen by this process's reaper; it changes when the server restarts."""


def resend_after_restart() -> int:
    """When Redis restarted since the last pass, re-send the messages of every waiting shard once.

    Messages a worker had taken but not yet acked (prefetched, or in flight when the connection
    dropped) are otherwise stranded until the broker's visibility timeout (hours). One reaper in
    the fleet does it (a key per server run id); duplicates of surviving messages are no-ops.
    """
    global _redis_run_id
    ctx = context()
    server = str(ctx.redis.info("server")["run_id"])
    previous, _redis_run_id = _redis_run_id, server
    if previous is None or previous == server:
        return 0
    if not ctx.redis.set(f"{KEY_PREFIX}:resent:{server}", 1, nx=True, ex=24 * 3600):
        return 0
    count = 0
    for run_id in ctx.state.active_runs():
        for shard_id, state in ctx.state.unleased(run_id):
            send("execute" if state is ShardState.QUEUED else "grade", run_id, shard_id)
            count += 1
    log.warning("redis restarted; re-sent waiting shards", count=count)
    return count


def reap_once() -> int:
    """Return every expired-lease shard of every active run to its queue; the count re-enqueued."""
    ctx = context()
    count = resend_after_restart()
    for run_id in ctx.state.active_runs():
        for shard_id, state in ctx.state.reap(run_id):
            kind = "execute" if state is ShardState.QUEUED else "grade"
            log.warning("lease expired; re-queued", run_id=run_id, shard_id=shard_id, queue=kind)
            send(kind, run_id, shard_id)
            count += 1
    return count


_stop_reaper = threading.Event()


def _reaper_loop(period: float) -> None:
    while not _stop_reaper.wait(period):
        try:
            reap_once()
        except Exception as exc:  # Redis restarting: try again next period
            log.warning("reaper pass failed", error=str(exc))


@worker_init.connect
def _on_worker_init(**_: object) -> None:
    from worker.warmup import start_warmup

    start_warmup()


@worker_process_init.connect
def _on_process_init(**_: object) -> None:
    reset_context()  # never share the parent's sockets across fork
    configure_logging()


@worker_ready.connect
def _on_ready(**_: object) -> None:
    from worker.workspace import reclaim_leftovers

    configure_logging()
    ctx = context()
    removed = reclaim_leftovers(ctx.settings.workspaces_dir, cache_dir=ctx.settings.cache_dir)
    if removed:
        log.info("reclaimed leftover workspaces", count=removed)
    threading.Thread(
        target=_reaper_loop, args=(ctx.settings.reaper_period_s,), name="lease-reaper", daemon=True
    ).start()


@worker_shutting_down.connect
def _on_shutdown(**_: object) -> None:
    _stop_reaper.set()
