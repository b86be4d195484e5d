"""The fleet's records in a real Redis: in-flight lists kept by the lease scripts (what KEDA adds to
the waiting messages), node liveness and the --health rule, the fleet-wide shard-timeout ceiling."""

from __future__ import annotations

import subprocess
import time

import pytest
import redis

from engine.fleet import Fleet, NodeRecord, assess, queue_list
from engine.keys import inflight_key, node_key
from engine.redis_server import RedisServer
from engine.settings import Settings
from engine.state import RunState
from producer.launch.fleet_checks import check_shard_timeout
from schemas.errors import ConfigError
from schemas.status import ShardState as S
from tests.deploy.support import SKILL_EVAL
from worker.app import TASK_EXECUTE, make_app
from worker.sandbox import throwaway_uid_range

RUN = "r1"
EXEC, GRADE = inflight_key("execute"), inflight_key("grade")


def entries(r: redis.Redis, key: str) -> list[str]:
    return [x.decode() for x in r.lrange(key, 0, -1)]


def test_a_leased_shard_is_in_flight_until_its_lease_ends_by_any_path(redis_client: redis.Redis) -> None:
    state = RunState(redis_client)
    state.register(RUN, ["s1", "s2", "s3"], "m", "now")
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "t1", 30)
    assert state.claim(RUN, "s2", S.QUEUED, S.EXECUTING, "t2", 30)
    assert entries(redis_client, EXEC) == [f"{RUN}|s1", f"{RUN}|s2"]
    assert state.transition(RUN, "s1", S.EXECUTED, "t1").moved  # executed: waits for a grader, not in flight
    assert entries(redis_client, EXEC) == [f"{RUN}|s2"]
    assert state.claim(RUN, "s1", S.EXECUTED, S.GRADING, "t3", 30)
    assert entries(redis_client, GRADE) == [f"{RUN}|s1"]
    assert state.transition(RUN, "s1", S.GRADED, "t3").moved
    assert entries(redis_client, GRADE) == []
    assert state.transition(RUN, "s2", S.EXECUTOR_FAILED, "t2").moved  # a terminal infra state
    assert entries(redis_client, EXEC) == []


def test_a_reaped_lease_leaves_the_in_flight_list_and_a_takeover_is_counted_once(redis_client: redis.Redis) -> None:
    state = RunState(redis_client)
    state.register(RUN, ["s1"], "m", "now")
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "dead", 0.05)
    time.sleep(0.1)
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "new", 0.05)  # takes over the expired lease
    assert entries(redis_client, EXEC) == [f"{RUN}|s1"]
    time.sleep(0.1)
    assert state.reap(RUN) == [("s1", S.QUEUED)]
    assert entries(redis_client, EXEC) == []


def test_a_hand_back_returns_the_shard_uncounted_and_only_for_the_lease_holder(redis_client: redis.Redis) -> None:
    state = RunState(redis_client)
    state.register(RUN, ["s1", "s2"], "m", "now")
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "mine", 30)
    assert state.release(RUN, "s1", "someone-else") is None
    assert state.get(RUN, "s1") is S.EXECUTING
    assert state.release(RUN, "s1", "mine") is S.QUEUED
    assert state.get(RUN, "s1") is S.QUEUED and entries(redis_client, EXEC) == []
    assert state.claims(RUN, "s1", S.EXECUTING) == 0  # a clean return, not a worker death
    assert not state.heartbeat(RUN, "s1", "mine", 30)  # the old holder's writes are refused from now on
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "next", 30)  # runs again as a new attempt
    assert state.claims(RUN, "s1", S.EXECUTING) == 1
    assert not state.transition(RUN, "s1", S.EXECUTED, "mine").moved
    assert state.claim(RUN, "s2", S.QUEUED, S.EXECUTING, "g", 30)
    assert state.transition(RUN, "s2", S.EXECUTED, "g").moved
    assert state.claim(RUN, "s2", S.EXECUTED, S.GRADING, "g2", 30)
    assert state.release(RUN, "s2", "g2") is S.EXECUTED  # grading goes back to executed
    assert entries(redis_client, GRADE) == []


def test_keda_list_names_are_where_celery_keeps_a_queues_waiting_messages(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    app = make_app(Settings(broker_url=redis_server.url))
    for i in range(3):
        app.send_task(TASK_EXECUTE, args=[RUN, f"s{i}"], queue="execute")
    assert Fleet(client).waiting(["execute"]) == 3 == client.llen(queue_list("execute"))
    assert Fleet(client).waiting(["grade", "reduce"]) == 0
    app.close()


def record(**kw: object) -> NodeRecord:
    base: dict[str, object] = dict(
        name="n",
        beat_ms=100_000,
        consumed_ms=100_000,
        slots=2,
        busy=0,
        queues=("execute",),
        max_shard_timeout_s=3600.0,
        handback=False,
    )
    return NodeRecord(**{**base, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rec", "waiting", "ok", "why"),
    [
        (None, 0, False, "no liveness record"),
        (record(beat_ms=100_000 - 61_000), 0, False, "heartbeat stale"),
        (record(consumed_ms=100_000 - 121_000), 5, False, "not consuming"),
        (record(consumed_ms=100_000 - 121_000, busy=1), 5, False, "1 free slot"),
        (record(consumed_ms=100_000 - 121_000, busy=2), 5, True, "2/2 busy"),  # fully busy: healthy
        (record(consumed_ms=100_000 - 121_000), 0, True, "0 waiting"),  # idle with nothing to do
        (record(consumed_ms=100_000 - 30_000), 5, True, "ok"),  # took one recently
        (record(consumed_ms=100_000 - 121_000, draining=True), 5, True, "draining"),  # stopped on purpose
        (record(beat_ms=100_000 - 61_000, draining=True), 5, False, "heartbeat stale"),
    ],
)
def test_the_health_rule(rec: NodeRecord | None, waiting: int, ok: bool, why: str) -> None:
    health = assess(rec, now_ms=100_000, waiting=waiting, stale_after_s=60, idle_after_s=120)
    assert health.ok is ok and why in health.reason


def test_a_beat_is_stamped_in_redis_time_and_read_back(redis_client: redis.Redis) -> None:
    fleet = Fleet(redis_client)
    fleet.beat("a@h", slots=4, busy=1, queues=["execute"], consumed_ago_s=10, max_shard_timeout_s=900)
    rec = fleet.record("a@h")
    assert rec is not None and (rec.slots, rec.busy, rec.queues) == (4, 1, ("execute",))
    now = fleet.now_ms()
    assert 0 <= now - rec.beat_ms < 2000 and 9_000 <= rec.beat_ms - rec.consumed_ms <= 10_001
    assert 0 < redis_client.ttl(node_key("a@h")) <= 24 * 3600
    fleet.request_handback("a@h")
    assert fleet.handback_requested("a@h") and not fleet.handback_requested("b@h")


def test_a_run_longer_than_the_fleet_ceiling_is_refused_by_name(redis_client: redis.Redis) -> None:
    url = redis_client.connection_pool.connection_kwargs
    settings = Settings(broker_url=f"redis://{url['host']}:{url['port']}/0", max_shard_timeout_s=1800)
    check_shard_timeout(1800, settings)
    with pytest.raises(ConfigError, match=r"--shard-timeout 1801 exceeds SKILL_EVAL_MAX_SHARD_TIMEOUT_S = 1800"):
        check_shard_timeout(1801, settings)
    # A live worker configured lower holds the fleet to its ceiling; a dead one's record does not.
    Fleet(redis_client).beat("low@h", slots=1, busy=0, queues=["execute"], consumed_ago_s=0, max_shard_timeout_s=600)
    with pytest.raises(ConfigError, match=r"live workers.* = 600"):
        check_shard_timeout(900, settings)
    redis_client.hset(node_key("low@h"), "beat_ms", 0)
    check_shard_timeout(900, settings)
    with pytest.raises(ConfigError, match="positive"):
        check_shard_timeout(0, settings)


def test_skill_eval_run_exits_2_naming_the_shard_timeout_over_the_ceiling(tmp_path: object) -> None:
    done = subprocess.run(
        [SKILL_EVAL, "run", "demo", "--model", "m", "--judge", "j", "--shard-timeout", "7200"],
        env={"PATH": "/usr/bin:/bin", "SKILL_EVAL_MAX_SHARD_TIMEOUT_S": "3600", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "CONFIG_ERROR: --shard-timeout 7200 exceeds SKILL_EVAL_MAX_SHARD_TIMEOUT_S = 3600" in done.stderr


def test_a_ceiling_that_a_task_could_outlive_the_redelivery_timeout_with_is_refused() -> None:
    with pytest.raises(ConfigError, match="must stay 600 s below"):
        Settings(max_shard_timeout_s=4 * 3600)


def test_throwaway_uids_fit_the_user_namespace_they_run_in() -> None:
    assert throwaway_uid_range("         0          0 4294967295\n") == (2_000_000_000, 100_000_000)
    first, count = throwaway_uid_range("         0 1000000000      65536\n")  # Kubernetes hostUsers: false
    assert first > 10001 and first + count <= 65534  # mapped, above the image user, below nobody
    assert count >= 30_000
