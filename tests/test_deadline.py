"""Per-shard deadlines on threads: the soft one interrupts the task's own thread, the hard one abandons it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time

import pytest
import redis

from engine.state import RunState
from schemas.errors import ShardDeadlineExceeded
from schemas.status import ShardState
from worker.deadline import shard_deadline
from worker.lifecycle import failure_outcome


def busy(seconds: float) -> None:
    """Pure Python work (no C call to wait on), as an agent loop or a parser would do."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_task_past_its_soft_deadline_is_interrupted_in_its_own_thread() -> None:
    started = time.monotonic()
    with pytest.raises(ShardDeadlineExceeded) as caught, shard_deadline(0.2, 10, what="t"):
        busy(5)
    assert time.monotonic() - started < 2
    # The lease lifecycle ends the shard in the infra failure of the phase it interrupted.
    assert failure_outcome(caught.value, ShardState.EXECUTING).state is ShardState.EXECUTOR_FAILED
    assert failure_outcome(caught.value, ShardState.GRADING).state is ShardState.GRADER_DISPATCH_FAILED
    assert "deadline" in str(caught.value)


def test_only_the_late_thread_is_interrupted_never_its_neighbours() -> None:
    outcomes: dict[str, str] = {}

    def shard(name: str, soft_s: float, work_s: float) -> None:
        try:
            with shard_deadline(soft_s, soft_s + 10, what=name):
                busy(work_s)
            outcomes[name] = "finished"
        except ShardDeadlineExceeded:
            outcomes[name] = "interrupted"

    threads = [
        threading.Thread(target=shard, args=("late", 0.2, 3)),
        threading.Thread(target=shard, args=("prompt", 5, 0.6)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert outcomes == {"late": "interrupted", "prompt": "finished"}


def test_a_task_that_ends_in_time_is_never_interrupted_afterwards() -> None:
    with shard_deadline(0.3, 0.6, what="t"):
        busy(0.05)
    busy(1.0)  # past both deadlines, outside the block: nothing may surface here


def test_a_thread_that_swallows_the_interruption_is_abandoned_at_the_hard_deadline() -> None:
    abandoned = threading.Event()
    with shard_deadline(0.1, 0.4, what="t", on_hard=abandoned.set):
        end = time.monotonic() + 2
        while time.monotonic() < end and not abandoned.is_set():
            with contextlib.suppress(ShardDeadlineExceeded):  # a careless handler deep in the task
                busy(0.05)
    assert abandoned.is_set()


def test_the_hard_deadline_does_nothing_when_the_task_ended_in_time() -> None:
    abandoned = threading.Event()
    with shard_deadline(0.1, 0.2, what="t", on_hard=abandoned.set):
        pass
    time.sleep(0.4)
    assert not abandoned.is_set()


def test_a_hard_deadline_before_the_soft_one_is_refused() -> None:
    with pytest.raises(ValueError, match="before the soft"), shard_deadline(2, 1, what="t"):
        pass


def test_an_abandoned_shard_loses_its_lease_and_the_reaper_requeues_it(redis_client: redis.Redis) -> None:
    state = RunState(redis_client)
    state.register("run-d", ["s1"], "runs/run-d/manifest.json", "2026-01-01T00:00:00")
    assert state.claim("run-d", "s1", ShardState.QUEUED, ShardState.EXECUTING, "stuck", 30)

    def abandon() -> None:
        state.expire_lease("run-d", "s1", "stuck")

    with shard_deadline(0.1, 0.3, what="s1", on_hard=abandon):
        end = time.monotonic() + 3
        while time.monotonic() < end:
            with contextlib.suppress(ShardDeadlineExceeded):  # a thread that will not stop, wherever it is hit
                if not state.heartbeat("run-d", "s1", "stuck", 30):
                    break
                busy(0.05)
    assert not state.heartbeat("run-d", "s1", "stuck", 30)  # its writes are refused from now on
    assert state.reap("run-d") == [("s1", ShardState.QUEUED)]  # and the shard is back, long before 30 s


def test_start_up_imports_litellm_once_and_freezes_it_out_of_the_collector() -> None:
    code = (
        "import gc, sys; from worker.warmup import import_heavy_modules; import_heavy_modules();"
        "print('litellm' in sys.modules, gc.isenabled(), gc.get_freeze_count() > 10000)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90, check=True)
    assert done.stdout.split() == ["True", "True", "True"]
