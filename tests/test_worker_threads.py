"""A worker node runs its shards on threads of one process and reserves only the messages it runs.

Real parts: redis-server, a worker node (``python -m worker.boot``, as ``skill-eval`` starts it), the bwrap
sandbox and the offline model server over HTTP.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from engine.redis_server import RedisServer
from engine.settings import Settings
from engine.state import RunState
from producer.launch.cluster import task_sender
from schemas.constants import QUEUE_GRADE
from schemas.status import ShardState
from testkit.offline_server import OfflineModelServer
from tests.engine_support import WorkerNode, make_corpus_repo, scenario, submit_run, wait_until

pytestmark = pytest.mark.slow

CONCURRENCY = 3


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    with RedisServer(workdir=tmp_path / "redis") as server:
        yield Settings(broker_url=server.url, store=str(tmp_path / "store"), workdir=tmp_path / "work")


def python_processes(node: WorkerNode) -> set[int]:
    """Pids of the node's processes running Python as a worker node (the sandbox's bwrap,
    prlimit and bash, and helpers such as git-filter-repo, are not among them)."""
    pids = set()
    for pid in set(node.group()):
        try:
            exe = Path(f"/proc/{pid}/exe").resolve().name
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if exe.startswith("python") and b"worker.boot" in cmdline:
            pids.add(pid)
    return pids


def test_shards_run_concurrently_on_threads_of_one_process_holding_only_what_runs(
    tmp_path: Path, settings: Settings
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=8)
    client = redis.Redis.from_url(settings.broker_url or "")
    state = RunState(client)
    node = WorkerNode(settings, "threads", tmp_path / "node.log", concurrency=CONCURRENCY)
    try:
        wait_until(node.ready, 60, what="worker ready")
        with OfflineModelServer(scenario(executor_delay_s=1.5)) as model:
            run_id = submit_run(repo, settings, model.base_url).plan.run_id
            most_executing = most_reserved = most_processes = 0
            previous: set[int] = set()
            while not state.reduced(run_id):
                executing = sum(s is ShardState.EXECUTING for s in state.states(run_id).values())
                most_executing = max(most_executing, executing)
                # kombu's Redis transport keeps every delivered, unacked message in this hash
                most_reserved = max(most_reserved, int(client.hlen("unacked")))
                # A child caught between its fork and its exec still shows the worker's executable and
                # command line for a moment; a pool process would be there sample after sample.
                current = python_processes(node)
                most_processes = max(most_processes, len(current & previous))
                previous = current
                time.sleep(0.2)
            assert set(state.states(run_id).values()) == {ShardState.GRADED}
    finally:
        node.stop()
    assert most_executing == CONCURRENCY  # as many shards in flight as asked for ...
    assert most_processes == 1  # ... on threads of one process
    assert 0 < most_reserved <= CONCURRENCY  # late acks: reserved = running, nothing strands behind a slow shard


def test_a_node_finishes_started_shards_before_it_starts_new_ones(tmp_path: Path, settings: Settings) -> None:
    """With grade messages waiting, a node serving every queue takes them before any execute.

    Round robin would alternate between the queues (grade, execute, grade, ...) and leave the
    last shards' grades behind new executes. Two grade messages (of shards not yet executed:
    they find nothing to do) wait on the queue beside the run's two executes when the node
    starts with one slot; the order the node receives them in is its consume order.
    """
    repo = make_corpus_repo(tmp_path / "repo", cases=2)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    with OfflineModelServer(scenario()) as model:
        manifest = submit_run(repo, settings, model.base_url)
        run_id = manifest.plan.run_id
        enqueue = task_sender(settings, manifest)
        for shard in manifest.plan.shards:
            enqueue.send(QUEUE_GRADE, run_id, shard.shard_id)
        node = WorkerNode(settings, "order", tmp_path / "node.log", concurrency=1)
        try:
            wait_until(lambda: state.reduced(run_id), 120, what="run reduced")
        finally:
            node.stop()
    received = re.findall(r"Task skill_eval\.(\w+)\[[^]]*\] received", node.text())
    assert received[:4] == ["grade", "grade", "execute", "grade"], received
    assert set(state.states(run_id).values()) == {ShardState.GRADED}  # the early grades changed nothing
