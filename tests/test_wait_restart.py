"""The producer's waits live through a broker restart, as the workers do.

A run on a fleet goes on while Redis restarts (with its append-only file, nothing is lost): the
command waiting for it must not end with a connection error. A broker that comes back without
the run (no persistence) is named, with the run's id, never a bare crash. Real redis-server
processes, killed and started again on the same port.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from rich.console import Console

from engine.redis_server import RedisServer
from engine.state import RunState
from producer.launch.preflight import wait_host_check
from producer.launch.progress import RunStalled, wait_for_run
from schemas.preflight import HOST_CHECK, HostCheckReport

RUN = "20260101-000000-0000beef"


def _in_thread(wait: Callable[[], None]) -> tuple[threading.Thread, dict[str, object]]:
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            wait()
            outcome["returned"] = True
        except Exception as exc:  # the test reads what the wait raised
            outcome["raised"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def _restart(server: RedisServer, down_s: float = 1.5) -> RunState:
    """Kill the server, leave it down a while (the waiter meets refused connections), start it again."""
    time.sleep(0.5)  # the waiter is blocked on the server
    server.kill()
    time.sleep(down_s)
    server.start()
    return RunState(redis.Redis.from_url(server.url))


def _wait(state: RunState) -> None:
    wait_for_run(state, RUN, console=Console(file=io.StringIO()), show=False, poll_s=0.2)


@pytest.mark.timeout(60)
def test_waiting_for_a_run_lives_through_a_broker_restart_that_kept_its_data(tmp_path: Path) -> None:
    with RedisServer(workdir=tmp_path / "redis", appendonly=True) as server:
        state = RunState(redis.Redis.from_url(server.url))
        state.register(RUN, ["s1", "s2"], "runs/x/manifest.json", "2026-01-01T00:00:00")
        thread, outcome = _in_thread(lambda: _wait(state))
        _restart(server).mark_reduced(RUN)
        thread.join(30)
    assert outcome == {"returned": True}


@pytest.mark.timeout(60)
def test_a_broker_back_without_the_run_is_named_with_the_run_id(tmp_path: Path) -> None:
    with RedisServer(workdir=tmp_path / "redis") as server:
        state = RunState(redis.Redis.from_url(server.url))
        state.register(RUN, ["s1", "s2"], "runs/x/manifest.json", "2026-01-01T00:00:00")
        thread, outcome = _in_thread(lambda: _wait(state))
        _restart(server)
        thread.join(30)
    raised = outcome.get("raised")
    assert isinstance(raised, RunStalled), outcome
    assert f"the broker no longer knows run {RUN}" in str(raised)
    assert f"skill-eval report {RUN}" in str(raised)


@pytest.mark.timeout(60)
def test_the_preflight_wait_lives_through_a_broker_restart(tmp_path: Path) -> None:
    with RedisServer(workdir=tmp_path / "redis", appendonly=True) as server:
        state = RunState(redis.Redis.from_url(server.url))
        thread, outcome = _in_thread(lambda: wait_host_check(RUN, state, timeout_s=30, recheck_s=0.2))
        _restart(server).put_preflight(RUN, HOST_CHECK, HostCheckReport(worker="w@h").model_dump_json())
        thread.join(30)
    assert outcome == {"returned": True}


@pytest.mark.timeout(60)
def test_the_preflight_wait_sends_the_check_again_after_a_broker_back_without_its_data(tmp_path: Path) -> None:
    """A Redis back without its data lost the check's message: sent again, a worker answers it, and the
    wait ends with that answer instead of timing out on a worker that never saw the question."""
    sent: list[str] = []
    with RedisServer(workdir=tmp_path / "redis") as server:
        state = RunState(redis.Redis.from_url(server.url))

        def resend() -> None:  # what a publisher's send would put on the execute queue
            sent.append(HOST_CHECK)

        thread, outcome = _in_thread(lambda: wait_host_check(RUN, state, timeout_s=30, recheck_s=0.2, resend=resend))
        back = _restart(server)
        deadline = time.monotonic() + 20
        while not sent and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sent == [HOST_CHECK]
        back.put_preflight(RUN, HOST_CHECK, HostCheckReport(worker="w@h").model_dump_json())
        thread.join(30)
    assert outcome == {"returned": True}
