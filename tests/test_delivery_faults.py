"""Nothing lost when a message dies with its worker, or with Redis: the delivery ledger under real faults.

Real redis-server (append-only), real worker nodes, the bwrap sandbox and the offline model
server over HTTP. The message that gets lost is lost the way an operator's cluster loses it:
an idle worker is stopped (SIGSTOP) while its consumer's blocking pop is pending at Redis, the
run is submitted, Redis hands the first message to the stopped worker's socket, and the
worker is killed (SIGKILL) before it ever reads it. The message is then in no queue and in no
``unacked`` set, and the shard holds no lease and no unsent note.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from engine.redis_server import RedisServer
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from producer.launch.cluster import task_sender
from producer.launch.submit import submit
from schemas.constants import QUEUE_EXECUTE
from schemas.manifest import AgentBudget, RunManifest, outcome_key, result_key
from schemas.report import RunResult
from schemas.status import ShardState
from testkit.offline_server import OfflineModelServer
from tests.engine_support import WorkerNode, make_corpus_repo, plan_manifest, scenario, submit_run, wait_until

pytestmark = pytest.mark.slow

REDELIVER_AFTER_S = 4.0
"""The ledger's bound in these tests (60 s in production): long enough for a loaded machine's
fresh worker to claim what it took, short enough for the test."""
BUDGET = AgentBudget(max_turns=4, wall_clock_s=60, command_timeout_s=30)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server with an append-only file, so a restart keeps the run's state and queues."""
    with RedisServer(workdir=tmp_path / "redis", appendonly=True) as server:
        yield server


def _settings(tmp_path: Path, broker: RedisServer, redeliver_after_s: float) -> Settings:
    return Settings(
        broker_url=broker.url,
        store=str(tmp_path / "store"),
        workdir=tmp_path / "work",
        lease_ttl_s=3.0,
        reaper_period_s=1.0,
        unsent_grace_s=2.0,
        redeliver_after_s=redeliver_after_s,
    )


@pytest.fixture
def nodes() -> Iterator[list[WorkerNode]]:
    started: list[WorkerNode] = []
    yield started
    for node in started:
        if node.proc.poll() is None:
            os.killpg(node.proc.pid, signal.SIGCONT)
        node.stop()


def _start(nodes: list[WorkerNode], settings: Settings, tmp_path: Path, *names: str) -> list[WorkerNode]:
    """Start nodes at once (their imports overlap) and wait until each is ready."""
    started = [WorkerNode(settings, name, tmp_path / f"{name}.log") for name in names]
    nodes.extend(started)
    for node in started:
        wait_until(node.ready, 90, what=f"worker {node.log.stem} ready")
    return started


def _next_pop(broker: RedisServer, timeout_s: float) -> None:
    """Return right after a consumer sent Redis a blocking pop (seen on a fresh MONITOR stream)."""
    deadline = time.monotonic() + timeout_s
    with socket.create_connection(("127.0.0.1", broker.port), timeout=0.5) as sock:
        sock.sendall(b"MONITOR\r\n")
        seen = b""
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                break
            seen = (seen + chunk)[-4096:]
            if b'"BRPOP"' in seen.upper():
                return
    raise TimeoutError("no consumer sent a blocking pop")


def _stop_holding_a_pop(node: WorkerNode, broker: RedisServer, publish: Callable[[], None]) -> None:
    """Stop ``node`` with its blocking pop pending and ``publish`` the message Redis then hands it.

    The consumer's pop times out after a second; stopped right after sending one, it is still
    pending when the message comes. Should the pop have timed out first (a stalled machine), the
    message is taken back and the node let go for its next pop.
    """
    client = redis.Redis.from_url(broker.url)
    for _ in range(10):
        _next_pop(broker, 30)
        os.killpg(node.proc.pid, signal.SIGSTOP)
        publish()
        time.sleep(1.5)  # the pop has been served, or has timed out, by now
        if client.llen(QUEUE_EXECUTE) == 0:
            return  # popped into the stopped worker's socket: it will never read it
        client.rpop(QUEUE_EXECUTE)
        os.killpg(node.proc.pid, signal.SIGCONT)
    raise AssertionError("the stopped worker never took the message")


def _submit_with_one_message_to(
    node: WorkerNode, broker: RedisServer, settings: Settings, manifest: RunManifest
) -> str:
    """Submit the run (registered, every message published and confirmed) with the first message going
    to ``node``'s pending pop; the shard that message was for."""
    publisher = task_sender(settings, manifest)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    lost: list[str] = []

    def enqueue(run_id: str, shard_id: str) -> None:
        if not lost:
            lost.append(shard_id)
            _stop_holding_a_pop(node, broker, lambda: publisher.send(QUEUE_EXECUTE, run_id, shard_id))
        else:
            publisher.send(QUEUE_EXECUTE, run_id, shard_id)

    submit(manifest, open_store(settings.store), state, enqueue)
    return lost[0]


def _result(settings: Settings, run_id: str) -> RunResult:
    return RunResult.model_validate_json(open_store(settings.store).get(result_key(run_id)))


def _figures(result: RunResult) -> list[tuple[str, int, int, int, str]]:
    return [(s.skill, s.behavioural.passed, s.behavioural.total, s.not_graded, s.headline) for s in result.skills]


def _assert_one_verdict_each(settings: Settings, manifest: RunManifest) -> None:
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    store = open_store(settings.store)
    run_id = manifest.plan.run_id
    assert set(state.states(run_id).values()) == {ShardState.GRADED}
    assert state.totals(run_id) == (len(manifest.plan.shards), len(manifest.plan.shards))
    for shard in manifest.plan.shards:
        assert store.exists(outcome_key(run_id, shard.shard_id))
        assert state.claims(run_id, shard.shard_id, ShardState.EXECUTING) == 1  # executed once, never twice


def test_a_message_taken_by_a_worker_killed_before_reading_it_is_sent_again_within_the_bound(
    tmp_path: Path, broker: RedisServer, nodes: list[WorkerNode]
) -> None:
    settings = _settings(tmp_path, broker, REDELIVER_AFTER_S)
    repo = make_corpus_repo(tmp_path / "repo", cases=4)
    state = RunState(redis.Redis.from_url(broker.url))
    with OfflineModelServer(scenario()) as model:
        (idle,) = _start(nodes, settings, tmp_path, "idle")
        manifest = plan_manifest(repo, settings, model.base_url, budget=BUDGET)
        run_id = manifest.plan.run_id
        lost = _submit_with_one_message_to(idle, broker, settings, manifest)
        idle.kill()  # the message dies with it
        assert state.get(run_id, lost) is ShardState.QUEUED
        fresh = _start(nodes, settings, tmp_path, "fresh1", "fresh2")
        started = time.monotonic()
        try:
            wait_until(lambda: state.reduced(run_id), 90, what="run reduced without its lost message")
        except TimeoutError as exc:
            raise AssertionError(f"stuck: {state.counts(run_id)}") from exc
        finished_s = time.monotonic() - started
        baseline = submit_run(repo, settings, model.base_url)  # the same run without a fault
        wait_until(lambda: state.reduced(baseline.plan.run_id), 60, what="baseline reduced")

    logs = "".join(node.text() for node in fresh)
    assert "message lost; sent again" in logs and lost in logs
    _assert_one_verdict_each(settings, manifest)
    assert _figures(_result(settings, run_id)) == _figures(_result(settings, baseline.plan.run_id))
    assert _result(settings, run_id).verdict is _result(settings, baseline.plan.run_id).verdict
    # the bound: the queue drains in seconds, then the ledger's bound and a reaper period or two
    assert finished_s < 60


def test_a_redis_restart_with_every_worker_replaced_sends_again_what_the_old_workers_took(
    tmp_path: Path, broker: RedisServer, nodes: list[WorkerNode]
) -> None:
    # A bound far beyond the test's patience: only the restart, seen in the data, can send it again.
    settings = _settings(tmp_path, broker, redeliver_after_s=600.0)
    repo = make_corpus_repo(tmp_path / "repo", cases=4)
    state = RunState(redis.Redis.from_url(broker.url))
    with OfflineModelServer(scenario()) as model:
        (old,) = _start(nodes, settings, tmp_path, "old")
        manifest = plan_manifest(repo, settings, model.base_url, budget=BUDGET)
        run_id = manifest.plan.run_id
        lost = _submit_with_one_message_to(old, broker, settings, manifest)
        broker.kill()
        old.kill()  # the whole fleet is replaced across the restart: no worker remembers the old server
        broker.start()
        fresh = _start(nodes, settings, tmp_path, "new1", "new2")
        try:
            wait_until(lambda: state.reduced(run_id), 60, what="run reduced after the restart")
        except TimeoutError as exc:
            raise AssertionError(f"stuck: {state.counts(run_id)}") from exc
        baseline = submit_run(repo, settings, model.base_url)
        wait_until(lambda: state.reduced(baseline.plan.run_id), 60, what="baseline reduced")

    logs = "".join(node.text() for node in fresh)
    assert logs.count("redis restarted; re-sent waiting shards") == 1  # one worker of the new fleet acts
    assert "message lost; sent again" not in logs
    assert state.get(run_id, lost) is ShardState.GRADED
    _assert_one_verdict_each(settings, manifest)
    assert _figures(_result(settings, run_id)) == _figures(_result(settings, baseline.plan.run_id))
