"""The fleet-wide limiter against a real Redis: pacing, leases, tokens, cool-down, adaptation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from engine.redis_server import RedisServer
from schemas.errors import ModelCallFailed
from schemas.model_config import LimiterSettings, ModelLimits
from worker.models.limiter import Limiter

ROOT = Path(__file__).resolve().parent.parent
EXACT = LimiterSettings(headroom=1.0)  # no headroom: the arithmetic below is exact


def limiter(client: redis.Redis, settings: LimiterSettings = EXACT, **limits: object) -> Limiter:
    return Limiter(client, ModelLimits(name="openai/test", **limits), settings)  # type: ignore[arg-type]


def test_requests_are_paced_evenly_at_the_configured_rpm(redis_client: redis.Redis) -> None:
    lim = limiter(redis_client, rpm=600)  # one request per 100 ms
    started = time.monotonic()
    for _ in range(6):
        with lim.acquire(10) as lease:
            lease.settle(10)
    elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 1.0  # the first is free, five more wait 100 ms each


def test_two_workers_share_one_pace(redis_server: RedisServer, redis_client: redis.Redis) -> None:
    other = redis.Redis.from_url(redis_server.url)
    a, b = limiter(redis_client, rpm=300), limiter(other, rpm=300)  # one per 200 ms, fleet-wide
    started = time.monotonic()
    for lim in (a, b, a, b):
        with lim.acquire(1):
            pass
    assert time.monotonic() - started >= 0.55
    other.close()


def test_the_concurrency_cap_holds_across_workers_and_frees_on_release(redis_client: redis.Redis) -> None:
    lim = limiter(redis_client, max_concurrency=2)
    with lim.acquire(1), lim.acquire(1):
        assert lim.snapshot()["leases"] == 2
        with pytest.raises(ModelCallFailed, match="no call slot within"), lim.acquire(1, max_wait_s=0.3):
            pass
    with lim.acquire(1, max_wait_s=0.3):
        assert lim.snapshot()["leases"] == 1
    assert lim.snapshot()["leases"] == 0


def test_a_live_holder_keeps_its_lease_past_the_ttl_by_heartbeat(redis_client: redis.Redis) -> None:
    lim = limiter(redis_client, LimiterSettings(lease_ttl_s=0.6), max_concurrency=1)
    with lim.acquire(1):
        time.sleep(1.5)  # well past the TTL: only the heartbeat keeps the slot held
        with pytest.raises(ModelCallFailed), lim.acquire(1, max_wait_s=0.3):
            pass


def test_one_heartbeat_thread_keeps_every_live_lease_and_leaves_when_none_is(redis_client: redis.Redis) -> None:
    lim = limiter(redis_client, LimiterSettings(lease_ttl_s=0.6), max_concurrency=3)
    with lim.acquire(1), lim.acquire(1):
        beat = lim._beat._thread
        assert beat is not None and beat.is_alive()
        for _ in range(20):  # calls coming and going beside the long ones start no thread of their own
            with lim.acquire(1) as lease:
                lease.settle(1)
            assert lim._beat._thread is beat
        time.sleep(1.5)  # well past the TTL: both long leases are still held by the one beat
        assert lim.snapshot()["leases"] == 2
        with lim.acquire(1, max_wait_s=0.3):
            assert lim.snapshot()["leases"] == 3
        with pytest.raises(ModelCallFailed), lim.acquire(1), lim.acquire(1, max_wait_s=0.3):
            pass
    beat.join(timeout=2.0)  # no lease left: it leaves at its next beat
    assert not beat.is_alive() and not lim._beat.running()
    with lim.acquire(1):  # and the next lease starts it again
        time.sleep(1.0)
        assert lim.snapshot()["leases"] == 1 and lim._beat.running()


def _expires_in_ms(client: redis.Redis, lim: Limiter, lease_id: str) -> float:
    seconds, micros = client.time()
    return float(client.zscore(lim.leases_key, lease_id) or 0) - (seconds * 1000 + micros / 1000)


def test_a_refresh_that_fails_leaves_the_beat_keeping_the_other_leases(redis_client: redis.Redis) -> None:
    lim = limiter(redis_client, LimiterSettings(lease_ttl_s=0.6), max_concurrency=2)
    refresh = lim._beat._refresh
    with lim.acquire(1) as broken, lim.acquire(1) as kept:

        def failing_for_one(lease: object) -> None:
            if lease is broken:
                raise RuntimeError("a refresh failing for a reason that is not Redis going away")
            refresh(lease)  # type: ignore[arg-type]

        lim._beat._refresh = failing_for_one  # type: ignore[method-assign]
        time.sleep(1.5)  # well past the TTL
        assert _expires_in_ms(redis_client, lim, kept.lease_id) > 0
        assert _expires_in_ms(redis_client, lim, broken.lease_id) < 0
        assert lim._beat.running()


def test_a_beat_thread_that_is_gone_is_started_again(redis_client: redis.Redis) -> None:
    """As in a forked child, where the parent's heartbeat thread object exists but never runs."""
    lim = limiter(redis_client, LimiterSettings(lease_ttl_s=0.6), max_concurrency=1)
    gone = threading.Thread(target=lambda: None)
    gone.start()
    gone.join()
    lim._beat._thread = gone
    with lim.acquire(1) as lease:
        time.sleep(1.5)
        assert _expires_in_ms(redis_client, lim, lease.lease_id) > 0


@pytest.mark.parametrize("script_loaded", [True, False], ids=["one-round-trip", "script-not-loaded"])
def test_a_settle_carries_the_callers_commands_exactly_once(redis_client: redis.Redis, script_loaded: bool) -> None:
    lim = limiter(redis_client, max_concurrency=1)
    with lim.acquire(1) as first:
        first.settle(1)  # loads the settle script
    if not script_loaded:
        redis_client.script_flush()  # as after a Redis restart: the settle must be sent again, alone
    with lim.acquire(100) as lease:
        lease.settle(40, also=lambda pipe: pipe.incr("test:settle-counter"))
    assert int(redis_client.get("test:settle-counter") or 0) == 1
    assert lim.snapshot()["leases"] == 0
    with lim.acquire(1, max_wait_s=0.3):  # the slot is free again
        pass


HOLDER = """
import sys, time, redis
from worker.models.limiter import Limiter
from schemas.model_config import LimiterSettings, ModelLimits
lim = Limiter(redis.Redis.from_url(sys.argv[1]), ModelLimits(name="openai/test", max_concurrency=1),
              LimiterSettings(lease_ttl_s=1.0))
with lim.acquire(1):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_killed_worker_process_never_leaks_its_slot(redis_server: RedisServer, redis_client: redis.Redis) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, redis_server.url],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        lim = limiter(redis_client, LimiterSettings(lease_ttl_s=1.0), max_concurrency=1)
        with pytest.raises(ModelCallFailed), lim.acquire(1, max_wait_s=0.5):
            pass  # the live worker holds the only slot
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed_at = time.monotonic()
        with lim.acquire(1, max_wait_s=5):
            reclaimed_after = time.monotonic() - killed_at
        assert reclaimed_after < 2.0  # within about one lease TTL of the death
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_tokens_are_estimated_before_the_call_and_corrected_after(redis_client: redis.Redis) -> None:
    lim = limiter(redis_client, tpm=60_000)  # 1,000 tokens per second, a minute's worth in the bucket
    with lim.acquire(60_000) as lease:
        assert lease.waited_s == 0
        lease.settle(6_000)  # the call used a tenth of its estimate: 54,000 come back
    with lim.acquire(50_000) as lease:
        assert lease.waited_s == 0
        lease.settle(50_000)
    with lim.acquire(5_000) as lease:  # 4,000 left: waits for the missing 1,000 (about 1 s)
        assert 0.8 <= lease.waited_s <= 1.2
        lease.settle(5_000)


def test_an_unsettled_lease_keeps_its_whole_estimate_charged(redis_client: redis.Redis) -> None:
    lim = limiter(redis_client, tpm=60_000)
    with lim.acquire(60_000):
        pass  # e.g. the call raised: the estimate stands
    with lim.acquire(1_000) as lease:
        assert lease.waited_s >= 0.8


def test_a_rate_limit_puts_every_worker_into_the_cool_down(
    redis_server: RedisServer, redis_client: redis.Redis
) -> None:
    other = redis.Redis.from_url(redis_server.url)
    a, b = limiter(redis_client), limiter(other)
    left = a.report_rate_limited(1.0)
    assert 0.9 <= left <= 1.0
    started = time.monotonic()
    with b.acquire(1):
        assert time.monotonic() - started >= 0.9
    other.close()


def test_the_pace_shrinks_once_per_episode_and_grows_back_after_successes(redis_client: redis.Redis) -> None:
    lim = limiter(redis_client, LimiterSettings(growth_per_success=0.05), rpm=60_000, max_concurrency=10)
    with lim.acquire(1) as first, lim.acquire(1) as second:
        lim.report_rate_limited(0.01, first)
        lim.report_rate_limited(0.01, second)  # same episode: both were in flight already
        assert lim.snapshot()["factor"] == pytest.approx(0.8)
    time.sleep(0.02)
    with lim.acquire(1) as later:
        lim.report_rate_limited(0.01, later)  # started after the cut: a new episode
    assert lim.snapshot()["factor"] == pytest.approx(0.64)
    time.sleep(0.02)
    for _ in range(3):
        with lim.acquire(1) as lease:
            lease.settle(1, success=True)
    assert lim.snapshot()["factor"] == pytest.approx(0.79)


def test_a_shrunk_pace_also_shrinks_the_concurrency_cap(redis_client: redis.Redis) -> None:
    lim = limiter(redis_client, LimiterSettings(shrink=0.5), max_concurrency=4)
    lim.report_rate_limited(0.0)
    with lim.acquire(1), lim.acquire(1), pytest.raises(ModelCallFailed), lim.acquire(1, max_wait_s=0.2):
        pass  # cap is 2 now, not 4


def test_the_limiter_rides_out_a_redis_restart(redis_server: RedisServer, redis_client: redis.Redis) -> None:
    lim = limiter(redis_client, rpm=600, max_concurrency=2)
    with lim.acquire(1):
        pass
    redis_server.kill()
    restarter = threading.Timer(0.5, redis_server.start)
    restarter.start()
    with lim.acquire(1) as lease:  # retried with backoff until Redis is back
        lease.settle(1)
    restarter.join()
    assert lim.snapshot()["leases"] == 0


def test_redis_down_past_the_retry_budget_fails_the_call_not_the_run(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    lim = limiter(client, LimiterSettings(redis_retry_s=0.5), rpm=60)
    redis_server.kill()
    try:
        with pytest.raises(ModelCallFailed, match="Redis unreachable"), lim.acquire(1):
            pass
    finally:
        redis_server.start()
        client.close()


def test_a_retry_after_that_is_not_a_finite_number_of_seconds_cools_down_as_none_would(
    redis_client: redis.Redis,
) -> None:
    # A provider's (or a broken gateway's) Retry-After of "inf" or "nan" must not stop the fleet
    # for good, nor a negative one end a cool-down before it began.
    for odd in (float("inf"), float("nan"), -5.0):
        lim = limiter(redis_client)
        lim.redis.delete(lim.state_key)
        left = lim.report_rate_limited(odd)
        assert 0.9 <= left <= 1.0, odd
        assert 0.9 <= lim.cooldown_left() <= 1.0, odd
