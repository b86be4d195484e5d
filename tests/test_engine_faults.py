"""The engine under faults, for real: redis-server, ``celery worker`` processes, the bwrap sandbox and
the offline model server over HTTP. A worker node SIGKILLed mid-shard, redelivered messages, Redis
killed and restarted mid-run, workspaces left by a killed task.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from engine.redis_server import RedisServer
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from schemas.manifest import grade_key, outcome_key, result_key
from schemas.status import ShardState
from testkit.offline_server import OfflineModelServer
from tests.engine_support import WorkerNode, make_corpus_repo, scenario, submit_run, wait_until
from worker.app import TASK_EXECUTE, TASK_GRADE, make_app

pytestmark = pytest.mark.slow

LEASE_TTL_S = 3.0
REAPER_PERIOD_S = 1.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server with an append-only file, so a restart keeps the run's state."""
    with RedisServer(workdir=tmp_path / "redis", appendonly=True) as server:
        yield server


@pytest.fixture
def settings(tmp_path: Path, broker: RedisServer) -> Settings:
    return Settings(
        broker_url=broker.url,
        store=str(tmp_path / "store"),
        workdir=tmp_path / "work",
        lease_ttl_s=LEASE_TTL_S,
        reaper_period_s=REAPER_PERIOD_S,
    )


@pytest.fixture
def nodes(tmp_path: Path, settings: Settings) -> Iterator[list[WorkerNode]]:
    """Worker nodes a test starts with ``start(name)``; all stopped at the end, whatever happened."""
    started: list[WorkerNode] = []
    yield started
    for node in started:
        node.stop()


def start(nodes: list[WorkerNode], settings: Settings, tmp_path: Path, name: str, concurrency: int = 1) -> WorkerNode:
    node = WorkerNode(settings, name, tmp_path / f"{name}.log", concurrency=concurrency)
    nodes.append(node)
    wait_until(node.ready, 60, what=f"worker {name} ready")
    return node


def leftovers(settings: Settings) -> list[Path]:
    return sorted(settings.workspaces_dir.iterdir()) if settings.workspaces_dir.is_dir() else []


def test_a_shard_of_a_killed_worker_node_is_requeued_by_the_lease_and_the_run_completes(
    tmp_path: Path, settings: Settings, nodes: list[WorkerNode]
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=2)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    with OfflineModelServer(scenario(executor_delay_s=4.0)) as model:
        doomed = start(nodes, settings, tmp_path, "doomed")
        manifest = submit_run(repo, settings, model.base_url)
        run_id = manifest.plan.run_id
        wait_until(lambda: ShardState.EXECUTING in state.states(run_id).values(), 30, what="a shard executing")
        # The claim comes first and the workspace a moment later (manifest, snapshot unpack, copy).
        wait_until(lambda: bool(leftovers(settings)), 30, what="the executing shard's workspace")
        doomed.kill()  # the whole node: its unacked message waits for the 4 h visibility timeout
        killed_at = time.monotonic()
        assert leftovers(settings), "a SIGKILLed task leaves its workspace behind"

        survivor = start(nodes, settings, tmp_path, "survivor")
        assert "reclaimed leftover workspaces" in survivor.text()
        wait_until(lambda: state.reduced(run_id), 60, what="run reduced after the kill")
        recovered_s = time.monotonic() - killed_at

    states = state.states(run_id)
    assert set(states.values()) == {ShardState.GRADED}, states
    assert "lease expired; re-queued" in survivor.text()
    assert recovered_s < 60
    assert open_store(settings.store).exists(result_key(run_id))
    assert leftovers(settings) == []


def test_a_redelivered_message_for_a_terminal_shard_does_nothing(
    tmp_path: Path, settings: Settings, nodes: list[WorkerNode]
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=2)
    client = redis.Redis.from_url(settings.broker_url or "")
    state = RunState(client)
    store = open_store(settings.store)
    with OfflineModelServer(scenario()) as model:
        node = start(nodes, settings, tmp_path, "only", concurrency=2)
        manifest = submit_run(repo, settings, model.base_url)
        run_id = manifest.plan.run_id
        wait_until(lambda: state.reduced(run_id), 60, what="run reduced")
        shard = manifest.plan.shards[0].shard_id
        before = (store.get(grade_key(run_id, shard)), store.get(outcome_key(run_id, shard)), state.totals(run_id))
        calls_before = model.stats()["total"]

        app = make_app(settings)
        app.send_task(TASK_EXECUTE, args=[run_id, shard], queue="execute")
        app.send_task(TASK_GRADE, args=[run_id, shard], queue="grade")
        wait_until(lambda: "execute skipped" in node.text() and "grade skipped" in node.text(), 30, what="both skipped")
        after = (store.get(grade_key(run_id, shard)), store.get(outcome_key(run_id, shard)), state.totals(run_id))
        assert after == before
        assert state.get(run_id, shard) is ShardState.GRADED
        assert model.stats()["total"] == calls_before  # no model call, no sandbox, nothing re-run


def test_a_run_survives_redis_killed_and_restarted_in_the_middle(
    tmp_path: Path, settings: Settings, broker: RedisServer, nodes: list[WorkerNode]
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=6)
    with OfflineModelServer(scenario(executor_delay_s=1.5, judge_delay_s=0.5)) as model:
        w1 = start(nodes, settings, tmp_path, "w1", concurrency=2)
        w2 = start(nodes, settings, tmp_path, "w2", concurrency=2)
        manifest = submit_run(repo, settings, model.base_url)
        run_id = manifest.plan.run_id
        state = RunState(redis.Redis.from_url(settings.broker_url or ""))
        wait_until(lambda: state.totals(run_id)[0] >= 1, 60, what="first shard terminal")
        assert not state.reduced(run_id)
        broker.kill()
        time.sleep(2.0)  # in-flight work hits connection errors and retries
        broker.start()
        try:
            wait_until(lambda: state.reduced(run_id), 90, what="run reduced after the Redis restart")
        except TimeoutError as exc:
            raise AssertionError(f"stuck: {state.states(run_id)}") from exc
    states = state.states(run_id)
    assert set(states.values()) == {ShardState.GRADED}, states
    assert len(states) == 6
    assert "redis restarted; re-sent waiting shards" in w1.text() + w2.text()
