"""SIGTERM as a bounded warm shutdown: finish running shards within the grace period, or hand them back.

An orchestrator scaling down sends SIGTERM and kills the node ``Settings.shutdown_grace_s`` later.
Celery's warm shutdown stops consuming and waits for running tasks with no time bound, so:

1. SIGTERM: the node stops taking messages (Celery's warm shutdown); running shards go on.
2. ``grace - margin``: if any still run, the node sets its ``handback`` flag in Redis. Each task's
   watcher thread (started beside its lease heartbeat, whatever the pool) sees it within a second,
   releases the lease (``executing -> queued`` or ``grading -> executed``, only if the lease is still
   its own, not counted as an attempt) and re-sends the shard's message. From then on the task's
   results are discarded (its lease is gone), so the shard's verdict comes from the new attempt only.
3. ``grace - margin / 2``: the node asks Celery for a cold shutdown (SIGQUIT to itself), which ends
   the pool's processes; their sandboxes die with them (bubblewrap ``--die-with-parent``).

The margin is a tenth of the grace period, between 4 and 60 seconds. See docs/design/deployment.md.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

import structlog

from engine.broker import Broker, send_shard
from engine.fleet import Fleet
from worker.context import Context, with_redis_retry

log = structlog.get_logger("skill_eval.worker")

HANDBACK_POLL_S = 1.0
"""How often a running task checks its node's hand-back flag."""


def margin_s(grace_s: float) -> float:
    """Time kept between handing shards back and the orchestrator's kill."""
    return min(60.0, max(4.0, grace_s / 10))


def hand_back(ctx: Context, broker: Broker, run_id: str, shard_id: str, token: str) -> bool:
    """Release our lease on the shard and re-send its message; False when the lease was not ours."""
    back = with_redis_retry(lambda: ctx.state.release(run_id, shard_id, token))
    if back is None:
        return False
    send_shard(broker, run_id, shard_id, back)
    with_redis_retry(lambda: ctx.state.mark_sent(run_id, [shard_id]))
    log.warning("shard handed back at shutdown", run_id=run_id, shard_id=shard_id, state=back.value)
    return True


def watch_handback(
    ctx: Context, broker: Broker, run_id: str, shard_id: str, token: str, stop: threading.Event, lost: threading.Event
) -> threading.Thread | None:
    """While the task runs (until ``stop``), hand the shard back when its node asks; then set ``lost``."""
    node = ctx.settings.node_name
    if not node:
        return None
    fleet = Fleet(ctx.redis)

    def loop() -> None:
        while not stop.wait(HANDBACK_POLL_S):
            try:
                if not fleet.handback_requested(node):
                    continue
                if hand_back(ctx, broker, run_id, shard_id, token):
                    lost.set()
                return
            except Exception as exc:  # Redis blip: the lease then lapses and the reaper re-queues
                log.warning("hand-back check failed", run_id=run_id, shard_id=shard_id, error=str(exc))

    thread = threading.Thread(target=loop, name=f"handback-{shard_id}", daemon=True)
    thread.start()
    return thread


def bound_warm_shutdown(ctx: Context, busy: Callable[[], int]) -> threading.Thread | None:
    """Start the clock of a warm shutdown that began now (main process); None for an unnamed node.

    The node's record is marked draining first, so the liveness probe does not fail a node that
    stopped consuming on purpose. Without a grace period the wait stays unbounded (Celery's own).
    """
    grace, node = ctx.settings.shutdown_grace_s, ctx.settings.node_name
    if not node:
        return None
    start = time.monotonic()
    margin = margin_s(grace) if grace is not None else 0.0
    handback_at = start + (grace or 0.0) - margin
    cold_at = start + (grace or 0.0) - margin / 2

    def clock() -> None:
        try:
            with_redis_retry(lambda: Fleet(ctx.redis).mark_draining(node))
        except Exception as exc:
            log.warning("could not mark the node draining", node=node, error=str(exc))
        if grace is None:
            return
        while time.monotonic() < handback_at:
            if not busy():
                return  # every shard finished in time: Celery exits by itself
            time.sleep(0.2)
        log.warning("shutdown grace running out; handing running shards back", node=node, running=busy())
        try:
            with_redis_retry(lambda: Fleet(ctx.redis).request_handback(node))
        except Exception as exc:  # leases then lapse and reapers re-queue the shards
            log.warning("hand-back request failed", node=node, error=str(exc))
        while time.monotonic() < cold_at:
            time.sleep(0.2)
        if busy():
            os.kill(os.getpid(), signal.SIGQUIT)  # Celery's cold shutdown: end the pool now

    thread = threading.Thread(target=clock, name="shutdown-clock", daemon=True)
    thread.start()
    return thread
