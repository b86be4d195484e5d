"""Nothing stranded, nothing twice: a publisher that dies midway, a second producer of the same run,
and duplicate deliveries, through a real redis-server, real ``celery worker`` processes and the
offline model server over HTTP.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import redis

from engine.records import put_manifest
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from producer.launch.cluster import task_sender
from producer.launch.submit import submit
from producer.plan.planning import new_run_id
from schemas.constants import QUEUE_EXECUTE
from schemas.manifest import AgentBudget, RunManifest, grade_key
from schemas.status import ShardState
from testkit.offline_server import OfflineModelServer
from tests.engine_support import WorkerNode, make_corpus_repo, plan_manifest, scenario, wait_until

pytestmark = pytest.mark.slow


class PublisherDied(Exception):
    pass


BUDGET = AgentBudget(max_turns=4, wall_clock_s=60, command_timeout_s=30)


def _manifest(repo: Path, settings: Settings, api_base: str, run_id: str | None = None) -> RunManifest:
    return plan_manifest(repo, settings, api_base, budget=BUDGET, run_id=run_id)


def _dying_publisher(settings: Settings, manifest: RunManifest, survive: int) -> tuple[object, object]:
    """An enqueue that publishes ``survive`` messages and then dies, like a producer host lost midway."""
    publisher = task_sender(settings, manifest)
    sent = [0]

    def enqueue(run_id: str, shard_id: str) -> None:
        if sent[0] >= survive:
            raise PublisherDied
        publisher.send(QUEUE_EXECUTE, run_id, shard_id)
        sent[0] += 1

    return enqueue, publisher.batch


def test_registered_shards_a_dead_publisher_never_sent_are_sent_once_by_the_reaper(
    tmp_path: Path, settings: Settings
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=6)
    client = redis.Redis.from_url(settings.broker_url or "")
    state = RunState(client)
    with OfflineModelServer(scenario()) as model:
        manifest = _manifest(repo, settings, model.base_url)
        run_id = manifest.plan.run_id
        enqueue, batch = _dying_publisher(settings, manifest, survive=2)
        with pytest.raises(PublisherDied):
            submit(manifest, open_store(settings.store), state, enqueue, batch)
        # The batch died before its flush: nothing of it reached the queue, every shard is registered.
        assert len(state.states(run_id)) == 6
        assert client.llen(QUEUE_EXECUTE) == 0
        node = WorkerNode(settings, "w", tmp_path / "w.log", concurrency=2)
        try:
            wait_until(lambda: state.reduced(run_id), 90, what="run reduced after the publisher died")
        finally:
            node.stop()
    states = state.states(run_id)
    assert set(states.values()) == {ShardState.GRADED}, states
    assert node.text().count("shard registered but never sent; sending") == 6
    for shard in manifest.plan.shards:  # each shard executed exactly once: one claim each
        assert state.claims(run_id, shard.shard_id, ShardState.EXECUTING) == 1


def test_the_reaper_resends_only_unsent_shards_never_the_waiting_backlog(settings: Settings) -> None:
    client = redis.Redis.from_url(settings.broker_url or "")
    state = RunState(client)
    ids = [f"s{i}" for i in range(10)]
    state.register("r", ids, "runs/r/manifest.json", "now")
    state.mark_sent("r", ids[:7])
    assert state.unsent("r", grace_s=60) == []  # within the grace period: the publisher may still be at it
    pending = state.unsent("r", grace_s=0)
    assert sorted(s for s, _ in pending) == ["s7", "s8", "s9"]
    assert {st for _, st in pending} == {ShardState.QUEUED}
    assert state.unsent("r", grace_s=1) == []  # handed out once, then renewed: no second send this period


def test_a_reaped_shard_stays_noted_until_its_resend_is_confirmed(settings: Settings) -> None:
    client = redis.Redis.from_url(settings.broker_url or "")
    state = RunState(client)
    state.register("r", ["a"], "runs/r/manifest.json", "now")
    state.mark_sent("r", ["a"])
    assert state.claim("r", "a", ShardState.QUEUED, ShardState.EXECUTING, "tok", ttl_s=0.001)
    wait_until(lambda: state.reap("r") == [("a", ShardState.QUEUED)], 5, what="lease expired and reaped")
    # A reaper that died right here, before re-sending, leaves "a" for the next pass:
    assert [s for s, _ in state.unsent("r", grace_s=0)] == ["a"]


def test_two_producers_submitting_one_run_id_give_one_verdict_per_shard(tmp_path: Path, settings: Settings) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=3)
    client = redis.Redis.from_url(settings.broker_url or "")
    state = RunState(client)
    store = open_store(settings.store)
    with OfflineModelServer(scenario()) as model:
        run_id = new_run_id()
        first = _manifest(repo, settings, model.base_url, run_id)
        second = _manifest(repo, settings, model.base_url, run_id)
        one, two = task_sender(settings, first), task_sender(settings, second)
        sent = [
            submit(first, store, state, lambda r, s: one.send(QUEUE_EXECUTE, r, s), one.batch),
            submit(second, store, state, lambda r, s: two.send(QUEUE_EXECUTE, r, s), two.batch),
        ]
        assert sent == [3, 0]  # the second producer finds every shard registered and sends nothing
        # and a duplicate delivery of every message on top:
        for shard in first.plan.shards:
            one.send(QUEUE_EXECUTE, run_id, shard.shard_id)
        node = WorkerNode(settings, "w", tmp_path / "w.log", concurrency=2)
        try:
            wait_until(lambda: state.reduced(run_id), 90, what="run reduced")
            wait_until(lambda: node.text().count("execute skipped") >= 3, 30, what="duplicates skipped")
        finally:
            node.stop()
    assert set(state.states(run_id).values()) == {ShardState.GRADED}
    assert state.totals(run_id) == (3, 3)
    assert len(store.list(f"runs/{run_id}/grades/")) == 3
    for shard in first.plan.shards:
        assert store.exists(grade_key(run_id, shard.shard_id))
        assert state.claims(run_id, shard.shard_id, ShardState.EXECUTING) == 1


class _CountingStore:
    """The run's real store, counting writes per key."""

    def __init__(self, inner: object) -> None:
        self.inner, self.puts = inner, Counter[str]()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def put(self, key: str, data: bytes) -> None:
        self.puts[key] += 1
        self.inner.put(key, data)  # type: ignore[attr-defined]


def test_a_manifest_the_preflight_already_stored_is_not_written_again(tmp_path: Path, settings: Settings) -> None:
    manifest = _manifest(make_corpus_repo(tmp_path / "repo", cases=2), settings, "http://127.0.0.1:9/v1")
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    store = _CountingStore(open_store(settings.store))
    key = put_manifest(store, manifest)  # type: ignore[arg-type]  # as the preflight does
    sent: list[str] = []

    assert submit(manifest, store, state, lambda _r, s: sent.append(s), stored_key=key) == 2  # type: ignore[arg-type]
    assert store.puts[key] == 1 and len(sent) == 2
    assert state.manifest_key(manifest.plan.run_id) == key
