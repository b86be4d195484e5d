"""Celery tasks: thin wrappers over worker.pipeline, plus the lease reaper and worker start-up."""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import uuid

import structlog
from celery.signals import (
    task_prerun,
    task_received,
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)

from engine.broker import queue_of, send_shard
from engine.delivery import Delivery
from engine.keys import reaper_lock_key
from schemas.constants import QUEUE_EXECUTE, QUEUE_GRADE, QUEUE_REDUCE
from schemas.manifest import calibration_key
from schemas.preflight import HOST_CHECK
from schemas.status import ShardState
from worker.app import (
    TASK_EXECUTE,
    TASK_GRADE,
    TASK_HOST_CHECK,
    TASK_PREFLIGHT,
    TASK_REDUCE,
    CeleryBroker,
    app,
)
from worker.context import Context, context, reset_context
from worker.models.base import ModelClient

log = structlog.get_logger("skill_eval.worker")


broker = CeleryBroker(app, lambda run_id: context().manifest(run_id))
"""Where this worker's follow-up messages go (grade after execute, reduce, the reaper's re-sends)."""


@app.task(name=TASK_EXECUTE)
def execute(run_id: str, shard_id: str) -> None:
    structlog.contextvars.bind_contextvars(run_id=run_id, shard_id=shard_id)
    from worker import pipeline  # the shards' modules: off the node's boot path (worker/warmup.py)

    with context().one_task():
        pipeline.execute_shard(context(), broker, run_id, shard_id)


@app.task(name=TASK_GRADE)
def grade(run_id: str, shard_id: str) -> None:
    structlog.contextvars.bind_contextvars(run_id=run_id, shard_id=shard_id)
    from worker import pipeline

    with context().one_task():
        pipeline.grade_shard(context(), broker, run_id, shard_id)


@app.task(name=TASK_REDUCE)
def reduce(run_id: str) -> None:
    structlog.contextvars.bind_contextvars(run_id=run_id, shard_id=None)
    from worker import pipeline

    with context().one_task():
        pipeline.reduce_stored_run(context(), run_id)


@app.task(name=TASK_PREFLIGHT)
def preflight(run_id: str, queue: str) -> None:
    """Check this run's models for ``queue`` from this worker and leave the report for the producer."""
    from schemas.preflight import PreflightReport
    from worker.grading.calibration import calibrate_in_background
    from worker.preflight import run_preflight
    from worker.warmup import start_workspace_warmup

    structlog.contextvars.bind_contextvars(run_id=run_id, shard_id=None)
    ctx = context()
    try:
        manifest = ctx.manifest(run_id)
        if queue == QUEUE_EXECUTE:
            start_workspace_warmup(ctx, manifest)  # while the check's call is out (worker/warmup.py)
        client = ctx.model_client(run_id)
        report = run_preflight(client, manifest, queue)
        if queue == QUEUE_GRADE and manifest.settings.calibrate and not report.failures():
            # Calibrated before the batch is graded, not before it executes: the calls overlap
            # the first shards (graders of this process wait for it, worker/grading/calibration.py).
            calibrate_in_background(
                run_id, manifest.plan.judges, lambda judge: _calibrate_or_release(ctx, client, run_id, judge)
            )
    except Exception as exc:  # a report must come back whatever failed, or the producer waits for nothing
        log.warning("preflight failed", queue=queue, error=str(exc))
        report = PreflightReport(queue=queue, worker=f"{socket.gethostname()}:{os.getpid()}", checks=[], error=str(exc))
    ctx.state.put_preflight(run_id, queue, report.model_dump_json())
    log.info("preflight", queue=queue, ok=all(c.ok for c in report.checks))


@app.task(name=TASK_HOST_CHECK)
def host_check(run_id: str) -> None:
    """Check that this worker's host can run the run's cases, and leave the report for the producer."""
    from worker.host_check import run_host_check

    structlog.contextvars.bind_contextvars(run_id=run_id, shard_id=None)
    ctx = context()
    report = run_host_check(ctx, run_id)
    ctx.state.put_preflight(run_id, HOST_CHECK, report.model_dump_json())
    log.info("host check", status=report.status or "ok")


def _calibrate_or_release(ctx: Context, client: ModelClient, run_id: str, judge: str) -> None:
    """Calibrate ``judge`` (lock and record as a grader would); on an error give the lock back, so a
    grader calibrates inline instead of the run going uncalibrated."""
    from engine.keys import calibrating_key
    from worker import pipeline

    try:
        pipeline.ensure_calibrated(ctx, client, run_id, judge)
    except Exception:
        if not ctx.store.exists(calibration_key(run_id, judge)):
            ctx.redis.delete(calibrating_key(run_id, judge))
        raise


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


def _resend(ctx: Context, run_id: str, shard_id: str, state: ShardState) -> None:
    send_shard(broker, run_id, shard_id, state)
    ctx.state.mark_sent(run_id, [shard_id])


def resend_after_restart() -> int:
    """When Redis restarted since any worker last looked, send again every shard whose message left its queue.

    A restart breaks every pending pop and drops what a worker had popped but not yet claimed;
    those messages are otherwise gone (or, recorded as unacked, back only after the broker's
    visibility timeout, hours). The restart is read from the data (engine/delivery.py:
    ``Delivery.restarted``), so any worker sees it, one started after the restart included, and
    exactly one acts on it. Should that one die midway, the ledger's bound still sends the rest.
    """
    ctx = context()
    delivery = Delivery(ctx.redis)
    if not delivery.restarted():
        return 0
    marks = delivery.watermarks()  # now: whatever left a queue before the restart is lost
    count = 0
    for run_id in ctx.state.active_runs():
        for shard_id, state in delivery.overdue(run_id, marks):
            _resend(ctx, run_id, shard_id, state)
            count += 1
    log.warning("redis restarted; re-sent waiting shards", count=count)
    return count


def reap_once() -> int:
    """One reaper pass over every active run; the count of messages re-sent.

    Only one worker in the fleet passes per period (a lock in Redis); the others skip. A
    pass returns expired-lease shards to their queue, sends the shards that were registered
    (or moved back) but never confirmed sent, and sends again, from the delivery ledger, the
    waiting shards whose message left its queue ``redeliver_after_s`` ago and was never claimed
    (engine/delivery.py), and the reduce of a run whose every shard ended that long ago
    unreduced. Shards whose message is still in a queue are left alone.
    """
    ctx = context()
    count = resend_after_restart()  # every worker watches for a restart; one re-sends (engine/delivery.py)
    period_ms = max(1, int(ctx.settings.reaper_period_s * 1000 * 0.9))
    if not ctx.redis.set(reaper_lock_key(), _reaper_token, nx=True, px=period_ms):
        return count
    delivery = Delivery(ctx.redis)
    # Read before this pass sends anything; what had left each queue redeliver_after_s ago.
    marks = delivery.watermarks_seen(ctx.settings.redeliver_after_s)
    for run_id in ctx.state.active_runs():
        for shard_id, state in ctx.state.reap(run_id):
            log.warning("lease expired; re-queued", run_id=run_id, shard_id=shard_id, queue=queue_of(state))
            _resend(ctx, run_id, shard_id, state)
            count += 1
        for shard_id, state in ctx.state.unsent(run_id, ctx.settings.unsent_grace_s):
            log.warning(
                "shard registered but never sent; sending", run_id=run_id, shard_id=shard_id, queue=queue_of(state)
            )
            _resend(ctx, run_id, shard_id, state)
            count += 1
        count += _redeliver(ctx, delivery, run_id, marks)
    return count


def _redeliver(ctx: Context, delivery: Delivery, run_id: str, marks: tuple[float, float]) -> int:
    """Send again what the delivery ledger finds lost in ``run_id``: overdue shards, a lost reduce."""
    count = 0
    for shard_id, state in delivery.overdue(run_id, marks):
        log.warning("message lost; sent again", run_id=run_id, shard_id=shard_id, queue=queue_of(state))
        _resend(ctx, run_id, shard_id, state)
        count += 1
    if delivery.reduce_due(run_id, ctx.settings.redeliver_after_s):
        log.warning("every shard ended but the run was never reduced; sending reduce", run_id=run_id)
        broker.send(QUEUE_REDUCE, run_id)
        count += 1
    return count


_reaper_token = uuid.uuid4().hex


_stop_reaper = threading.Event()


def _reaper_loop(period: float) -> None:
    while not _stop_reaper.wait(period):
        try:
            reap_once()
        except Exception as exc:  # Redis restarting: try again next period
            log.warning("reaper pass failed", error=str(exc))


@task_prerun.connect
def _on_task_start(**_: object) -> None:
    from worker.warmup import release_heavy_imports

    release_heavy_imports()  # the node is up and working: the rest of its imports go ahead


@worker_init.connect
def _on_worker_init(**_: object) -> None:
    from worker.warmup import start_warmup

    start_warmup()


@worker_process_init.connect
def _on_process_init(**_: object) -> None:
    reset_context()  # never share the parent's sockets across fork
    configure_logging()


@worker_ready.connect
def _on_ready(sender: object = None, **_: object) -> None:
    from worker.liveness import start_heartbeat
    from worker.workspace import reclaim_leftovers

    configure_logging()
    ctx = context()
    removed = reclaim_leftovers(ctx.settings.workspaces_dir, cache_dir=ctx.settings.cache_dir)
    if removed:
        log.info("reclaimed leftover workspaces", count=removed)
    threading.Thread(
        target=_reaper_loop, args=(ctx.settings.reaper_period_s,), name="lease-reaper", daemon=True
    ).start()
    if ctx.settings.node_name:  # a liveness record for `skill-eval worker --health` (worker/liveness.py)
        slots = int(getattr(getattr(sender, "controller", None), "concurrency", 0) or 0)
        start_heartbeat(ctx, ctx.settings.node_name, slots, sorted(app.amqp.queues.consume_from))


@task_received.connect
def _on_received(**_: object) -> None:
    from worker.liveness import note_consumed

    note_consumed()


@worker_shutting_down.connect
def _on_shutdown(how: str = "", **_: object) -> None:
    from worker.liveness import busy_count
    from worker.shutdown import bound_warm_shutdown

    _stop_reaper.set()
    if how == "Warm":  # bounded by the grace period (worker/shutdown.py)
        bound_warm_shutdown(context(), busy_count)


@worker_shutdown.connect
def _on_stopped(**_: object) -> None:
    from engine.fleet import Fleet
    from worker.liveness import stop_heartbeat

    stop_heartbeat()
    node = context().settings.node_name
    if node:
        try:
            Fleet(context().redis).forget(node)
        except Exception as exc:  # Redis gone: the record expires on its own
            log.warning("could not remove the node record", error=str(exc))
