"""The broker seam: one map from a shard's state to its queue, the Celery broker's messages on a real
Redis, and the in-process broker the unit tests hand the worker code."""

from __future__ import annotations

import json

import pytest
import redis

from engine.broker import InProcessBroker, Message, NotOnAQueue, queue_of, send_shard
from engine.delivery import message_ids
from engine.records import put_manifest
from engine.redis_server import RedisServer
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from producer.launch.resubmit import Resubmitted, resubmit_run
from producer.plan.planning import plan_run
from schemas.constants import QUEUE_EXECUTE, QUEUE_GRADE, QUEUE_REDUCE
from schemas.corpus import Corpus, EvalCase
from schemas.manifest import RunManifest, manifest_key
from schemas.shard import SkillBundle
from schemas.status import TERMINAL_STATES, ShardState
from worker.app import HOST_CHECK_LIMIT_S, TASK_HOST_CHECK, TASK_PREFLIGHT, CeleryBroker, make_app, time_limits


def test_a_shard_goes_to_the_queue_whose_task_takes_it_waiting_or_holds_it_leased() -> None:
    assert [queue_of(s) for s in (ShardState.QUEUED, ShardState.EXECUTING)] == [QUEUE_EXECUTE] * 2
    assert [queue_of(s) for s in (ShardState.EXECUTED, ShardState.GRADING)] == [QUEUE_GRADE] * 2
    for state in TERMINAL_STATES:
        with pytest.raises(NotOnAQueue, match=f"a {state.value} shard is on no queue"):
            queue_of(state)


def test_the_in_process_broker_keeps_every_message_and_hands_them_out_first_in_first_out() -> None:
    broker = InProcessBroker()
    with broker.batch():
        send_shard(broker, "r", "s1", ShardState.QUEUED)
        send_shard(broker, "r", "s2", ShardState.EXECUTED)
    broker.send(QUEUE_REDUCE, "r")
    assert broker.batches == 1
    assert broker.take() == Message(QUEUE_EXECUTE, "r", "s1")
    assert broker.take() == Message(QUEUE_GRADE, "r", "s2")
    assert broker.take() == Message(QUEUE_REDUCE, "r", None)
    assert broker.take() is None
    assert broker.on(QUEUE_GRADE) == [Message(QUEUE_GRADE, "r", "s2")] and len(broker.messages) == 3


def _manifest() -> RunManifest:
    case = EvalCase(id=1, prompt="p", expected_output="-", files=(), assertions=("The agent runs x in the shell",))
    corpus = Corpus(skill_name="s", evals=tuple(case.model_copy(update={"id": i}) for i in (1, 2, 3, 4)))
    bundle = SkillBundle(skill="s", bundle_key="s-0", corpus_file="evals/s.evals.json", corpus=corpus)
    return RunManifest(plan=plan_run("20260101-000000-00c0ffee", [bundle], ["m"], judges=["j"]), snapshots={})


def _queued(client: redis.Redis, queue: str) -> list[tuple[tuple[str, str] | None, list[float]]]:
    """(run, shard) and the (hard, soft) time limits of each message on ``queue``, oldest first."""
    raw = reversed(client.lrange(queue, 0, -1))  # kombu pushes on the left
    return [(message_ids(m), json.loads(m)["headers"]["timelimit"]) for m in raw]


def test_the_celery_broker_sends_ids_only_with_each_task_s_time_limits_and_reads_a_manifest_for_execute_only(
    redis_server: RedisServer, redis_client: redis.Redis
) -> None:
    manifest = _manifest()
    read: list[str] = []

    def manifest_of(run_id: str) -> RunManifest:
        read.append(run_id)
        return manifest

    broker = CeleryBroker(make_app(Settings(broker_url=redis_server.url)), manifest_of)
    with broker.batch():
        broker.send(QUEUE_EXECUTE, "r", "s1")
        broker.send(QUEUE_EXECUTE, "r", "s2")
    broker.send(QUEUE_GRADE, "r", "s1")
    broker.send(QUEUE_REDUCE, "r")

    execute_soft, execute_hard = time_limits(manifest, QUEUE_EXECUTE)
    assert _queued(redis_client, QUEUE_EXECUTE) == [
        (("r", "s1"), [execute_hard, execute_soft]),
        (("r", "s2"), [execute_hard, execute_soft]),
    ]
    grade_soft, grade_hard = time_limits(None, QUEUE_GRADE)
    assert _queued(redis_client, QUEUE_GRADE) == [(("r", "s1"), [grade_hard, grade_soft])]
    assert [m[1] for m in _queued(redis_client, QUEUE_REDUCE)] == [list(reversed(time_limits(None, QUEUE_REDUCE)))]
    assert read == ["r", "r"]  # grade and reduce go out for a run whose manifest cannot be read


def test_the_host_check_and_the_preflight_go_to_the_queues_that_check_with_no_manifest_read(
    redis_server: RedisServer, redis_client: redis.Redis
) -> None:
    read: list[str] = []
    broker = CeleryBroker(make_app(Settings(broker_url=redis_server.url)), lambda run_id: read.append(run_id))
    broker.host_check("r")
    broker.preflight("r", QUEUE_GRADE)
    (host,) = [json.loads(m) for m in redis_client.lrange(QUEUE_EXECUTE, 0, -1)]
    (models,) = [json.loads(m) for m in redis_client.lrange(QUEUE_GRADE, 0, -1)]
    assert (host["headers"]["task"], host["headers"]["timelimit"]) == (TASK_HOST_CHECK, [HOST_CHECK_LIMIT_S, 3540])
    assert models["headers"]["task"] == TASK_PREFLIGHT and read == []
    in_process = InProcessBroker()
    in_process.host_check("r")
    in_process.preflight("r", QUEUE_GRADE)
    assert (in_process.host_checks, in_process.preflights, in_process.messages) == (["r"], [("r", QUEUE_GRADE)], [])


def test_a_resubmit_of_stale_shards_sends_each_waiting_one_without_a_lease_to_its_state_s_queue(
    settings: Settings,
) -> None:
    manifest = _manifest()
    run_id = manifest.plan.run_id
    put_manifest(open_store(settings.store), manifest)
    client = redis.Redis.from_url(settings.broker_url or "")
    state = RunState(client)
    ids = sorted(s.shard_id for s in manifest.plan.shards)
    state.register(run_id, ids, manifest_key(run_id), "now")
    state.transition(run_id, ids[0], ShardState.EXECUTED)
    assert state.claim(run_id, ids[1], ShardState.QUEUED, ShardState.EXECUTING, "t", 30)  # held: not stale

    done = resubmit_run(run_id, settings, only=["stale"])

    waiting = {ids[0]: QUEUE_GRADE, **{s: QUEUE_EXECUTE for s in ids[2:]}}
    assert len(ids) == 4 and sorted(done.stale) == sorted(waiting)
    for queue in (QUEUE_EXECUTE, QUEUE_GRADE):
        sent = sorted(message for message, _ in _queued(client, queue))
        assert sent == sorted((run_id, s) for s, q in waiting.items() if q == queue)


def test_a_second_resubmit_says_it_only_sent_again_what_the_first_had_re_queued(settings: Settings) -> None:
    """Two resubmits of one run, one after the other (or at once): the first re-queues the failed shards,
    the second finds them queued and only sends their messages again, and says so, not that it re-queued."""
    manifest = _manifest()
    run_id = manifest.plan.run_id
    put_manifest(open_store(settings.store), manifest)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    ids = sorted(s.shard_id for s in manifest.plan.shards)
    state.register(run_id, ids, manifest_key(run_id), "now")
    for shard_id in ids[:2]:
        assert state.claim(run_id, shard_id, ShardState.QUEUED, ShardState.EXECUTING, "t", 30)
        state.transition(run_id, shard_id, ShardState.EXECUTOR_FAILED, "t")

    first = resubmit_run(run_id, settings).summary(run_id)
    second = resubmit_run(run_id, settings).summary(run_id)

    assert first == f"re-queued 2 shards of run {run_id}: 2 to execute, 0 to grade, 2 waiting shards sent again"
    assert second == f"re-queued nothing in run {run_id}; 4 waiting shards sent again"


def test_a_resubmit_whose_shards_moved_on_before_it_could_move_them_says_so() -> None:
    said = Resubmitted(stale=["a"], moved_on=2).summary("r")
    assert said == "re-queued nothing in run r; 1 waiting shard sent again; 2 moved on before this resubmit could" + (
        " (already re-queued?)"
    )
