"""A worker node's liveness record: a heartbeat thread in the node's main process.

Every ``Settings.node_beat_s`` it writes ``beat_ms``, pool size, tasks running and when the node last
took a message (``engine/fleet.py``). The heartbeat alone would prove only that the process lives:
a consumer that stopped taking messages after a broker reconnect keeps beating. So the record also
carries when the consumer last received a message, and ``skill-eval worker --health`` fails a node
that has a free slot, messages waiting and has taken nothing for a while.

The consumer thread only stamps a monotonic clock on each received message (no I/O on its path);
the heartbeat thread turns that into Redis time. Nodes without a name (the embedded cluster) keep
no record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import structlog

from engine.fleet import Fleet
from worker.context import Context

log = structlog.get_logger("skill_eval.worker")

_last_consumed = time.monotonic()
_stop = threading.Event()


def note_consumed() -> None:
    """A message was taken off a queue (called on the consumer's thread: no I/O)."""
    global _last_consumed
    _last_consumed = time.monotonic()


def busy_count() -> int:
    """Tasks this node is running now."""
    from celery.worker import state

    return len(state.active_requests)


def beat_once(ctx: Context, node: str, slots: int, queues: Sequence[str]) -> None:
    Fleet(ctx.redis).beat(
        node,
        slots=slots,
        busy=busy_count(),
        queues=queues,
        consumed_ago_s=time.monotonic() - _last_consumed,
        max_shard_timeout_s=ctx.settings.max_shard_timeout_s,
    )


def start_heartbeat(ctx: Context, node: str, slots: int, queues: Sequence[str]) -> threading.Thread:
    """Write the record now and then every ``node_beat_s`` until ``stop_heartbeat``."""
    note_consumed()  # a node that just started has not been idle
    _stop.clear()

    def loop() -> None:
        while True:
            try:
                beat_once(ctx, node, slots, queues)
            except Exception as exc:  # Redis restarting: the record goes stale, which is the truth
                log.warning("node heartbeat failed", node=node, error=str(exc))
            if _stop.wait(ctx.settings.node_beat_s):
                return

    thread = threading.Thread(target=loop, name="node-heartbeat", daemon=True)
    thread.start()
    return thread


def stop_heartbeat() -> None:
    _stop.set()
