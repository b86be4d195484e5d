"""Poisoned messages: an unknown run or shard, a manifest gone or corrupt, a missing snapshot.

Each is rejected with a logged reason and ends in a terminal infra state (never retried
forever), and the run still reduces. Real redis-server, real ``celery worker`` node, the
offline model server over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from engine.records import load_outcome
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from schemas.manifest import manifest_key
from schemas.status import ShardState
from testkit.offline_server import OfflineModelServer
from tests.engine_support import WorkerNode, make_corpus_repo, scenario, submit_run, wait_until
from worker.app import TASK_EXECUTE, make_app

pytestmark = pytest.mark.slow


@pytest.fixture
def node(tmp_path: Path, settings: Settings) -> Iterator[WorkerNode]:
    worker = WorkerNode(settings, "w", tmp_path / "w.log", concurrency=2)
    wait_until(worker.ready, 60, what="worker ready")
    yield worker
    worker.stop()


def test_a_message_for_an_unknown_run_or_shard_is_dropped_with_a_reason(settings: Settings, node: WorkerNode) -> None:
    app = make_app(settings)
    app.send_task(TASK_EXECUTE, args=["no-such-run", "no-such-shard"], queue="execute")
    wait_until(lambda: "execute skipped: shard not claimable" in node.text(), 30, what="the unknown shard dropped")
    client = redis.Redis.from_url(settings.broker_url or "")
    assert client.llen("execute") == 0  # not requeued, not retried
    assert RunState(client).states("no-such-run") == {}


@pytest.mark.parametrize("damage", ["corrupt", "gone"])
def test_a_run_whose_manifest_is_unreadable_ends_its_shards_infra_and_still_reduces(
    tmp_path: Path, settings: Settings, damage: str
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=2)
    store = open_store(settings.store)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    with OfflineModelServer(scenario()) as model:
        manifest = submit_run(repo, settings, model.base_url)  # queued, no worker yet
        run_id = manifest.plan.run_id
        path = Path(settings.store) / manifest_key(run_id)
        if damage == "corrupt":
            path.write_bytes(b'{"plan": "not a plan"')
        else:
            path.unlink()
        node = WorkerNode(settings, "w", tmp_path / "w.log", concurrency=1)
        try:
            wait_until(lambda: state.reduced(run_id), 60, what="the poisoned run reduced")
        finally:
            node.stop()
    assert set(state.states(run_id).values()) == {ShardState.EXECUTOR_FAILED}
    assert "poisoned message rejected" in node.text()
    for shard in manifest.plan.shards:
        record = load_outcome(store, run_id, shard.shard_id)
        assert record is not None and "the run's manifest cannot be used" in record.detail
        assert state.claims(run_id, shard.shard_id, ShardState.EXECUTING) == 1  # no redelivery loop


def test_a_missing_snapshot_blocks_the_shards_naming_the_key_and_the_run_still_reduces(
    tmp_path: Path, settings: Settings
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=2)
    store = open_store(settings.store)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    with OfflineModelServer(scenario()) as model:
        manifest = submit_run(repo, settings, model.base_url)
        run_id = manifest.plan.run_id
        snapshot = next(iter(manifest.snapshots.values()))
        (Path(settings.store) / snapshot).unlink()
        node = WorkerNode(settings, "w", tmp_path / "w.log", concurrency=1)
        try:
            wait_until(lambda: state.reduced(run_id), 60, what="the run reduced")
        finally:
            node.stop()
    # No workspace can be made: BLOCKED_NO_ISOLATION, which never runs the case anywhere else.
    assert set(state.states(run_id).values()) == {ShardState.BLOCKED}
    record = load_outcome(store, run_id, manifest.plan.shards[0].shard_id)
    assert record is not None and record.status == "BLOCKED_NO_ISOLATION" and snapshot in record.detail
