"""Independent judge calls of one shard, sent together.

A shard's judge calls (each judge's batch grading, every vote on a focused or baseline
assertion) do not depend on each other, and each waits mostly on the model: one after the
other, a suite with five focused assertions and two judges would wait thirty model latencies
per shard. Sent together they wait about one; the fleet-wide limiter still decides when each
call leaves, so sending them together never exceeds the provider's limits.

Each call runs in a copy of the caller's context (its structured-log bindings: run and shard).
The caller waits in short slices, so a shard's soft deadline raised into its thread lands
within one slice; the calls still out are then left to their own timeouts, never waited for.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_CALLS_AT_ONCE = 8
"""Per shard; a worker runs many shards on its threads, so this bounds the threads one adds."""
WAIT_SLICE_S = 0.5


def fan_out(call: Callable[[T], R], items: Sequence[T], *, name: str) -> list[R]:
    """``call`` on every item at once (at most :data:`MAX_CALLS_AT_ONCE`), the results in the items'
    order. One item runs on the caller's thread. A call's exception is raised here as soon as it
    is seen; the calls not yet started are cancelled and those still out are not waited for."""
    if len(items) <= 1:
        return [call(item) for item in items]
    pool = ThreadPoolExecutor(max_workers=min(len(items), MAX_CALLS_AT_ONCE), thread_name_prefix=name)
    try:
        futures: list[Future[R]] = [pool.submit(contextvars.copy_context().run, call, item) for item in items]
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=WAIT_SLICE_S, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f in done and f.exception() is not None), None)
            if failed is not None:
                failed.result()  # raises the call's own exception, with its traceback
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
