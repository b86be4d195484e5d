"""A shard's independent judge calls sent together: results in order, the first failure raised
without waiting for the calls still out, the caller's log context carried into each call."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from worker.grading.fanout import MAX_CALLS_AT_ONCE, fan_out

RUN = contextvars.ContextVar("run", default="none")


def test_the_results_keep_the_items_order_whatever_order_the_calls_end_in() -> None:
    def call(n: int) -> int:
        time.sleep(0.05 * (5 - n))  # the first item ends last
        return n * n

    assert fan_out(call, [0, 1, 2, 3, 4], name="t") == [0, 1, 4, 9, 16]


def test_the_calls_run_at_the_same_time_up_to_the_cap() -> None:
    at_once, peak, lock = 0, 0, threading.Lock()
    everyone_in = threading.Barrier(MAX_CALLS_AT_ONCE, timeout=60)

    def call(_n: int) -> None:
        nonlocal at_once, peak
        with lock:
            at_once += 1
            peak = max(peak, at_once)
        if _n < MAX_CALLS_AT_ONCE:
            everyone_in.wait()  # would time out (BrokenBarrierError) if the calls ran one by one
        with lock:
            at_once -= 1

    fan_out(call, list(range(MAX_CALLS_AT_ONCE + 4)), name="t")
    assert peak == MAX_CALLS_AT_ONCE


def test_a_failure_is_raised_without_waiting_for_a_call_still_out() -> None:
    release = threading.Event()

    def call(n: int) -> int:
        if n == 1:
            raise ValueError("judge 1 broke")
        release.wait(60)  # the slow call: fan_out must not wait for it
        return n

    started = time.monotonic()
    with pytest.raises(ValueError, match="judge 1 broke"):
        fan_out(call, [0, 1], name="t")
    assert time.monotonic() - started < 30
    release.set()


def test_each_call_sees_the_callers_context() -> None:
    RUN.set("run-7")
    assert fan_out(lambda _n: RUN.get(), [0, 1, 2], name="t") == ["run-7"] * 3


def test_one_item_runs_on_the_callers_thread() -> None:
    assert fan_out(lambda _n: threading.current_thread().name, ["only"], name="t") == [threading.current_thread().name]
    assert fan_out(lambda n: n, [], name="t") == []
