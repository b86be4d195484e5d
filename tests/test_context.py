"""Per-process resources shared by a worker's threads: built once, bounded."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import redis

from engine.redis_server import RedisServer
from engine.settings import Settings
from schemas.status import ShardState
from worker import context as ctxmod
from worker.context import RUNS_KEPT, remember_recent


def test_a_long_lived_worker_keeps_only_its_most_recent_runs() -> None:
    cache: OrderedDict[str, int] = OrderedDict()
    made: list[str] = []

    def make(key: str) -> int:
        made.append(key)
        return len(made)

    for i in range(RUNS_KEPT):
        remember_recent(cache, f"run-{i}", lambda i=i: make(f"run-{i}"))
    assert remember_recent(cache, "run-0", lambda: make("again")) == 1  # a hit, and now the most recent
    remember_recent(cache, "run-new", lambda: make("run-new"))
    assert len(cache) == RUNS_KEPT
    assert "run-1" not in cache and "run-0" in cache  # the least recently used one went
    assert "again" not in made


def test_threads_asking_at_once_share_one_context() -> None:
    ctxmod.reset_context()
    seen: list[object] = []
    barrier = threading.Barrier(8)

    def ask() -> None:
        barrier.wait()
        seen.append(ctxmod.context())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    ctxmod.reset_context()
    assert len(seen) == 8 and len({id(c) for c in seen}) == 1


def test_a_task_reads_its_runs_manifest_key_once_and_the_next_task_reads_it_afresh(
    redis_client: redis.Redis, redis_server: RedisServer, tmp_path: Path
) -> None:
    ctx = ctxmod.Context(Settings(broker_url=redis_server.url, store=str(tmp_path / "store")))
    ctx.state.register("run-1", ["s1"], "runs/run-1/manifest-1.json", created="now")
    with ctx.one_task():
        assert ctx.manifest_key("run-1") == "runs/run-1/manifest-1.json"
        ctx.state.set_manifest_key("run-1", "runs/run-1/manifest-2.json")  # a resubmit meanwhile
        assert ctx.manifest_key("run-1") == "runs/run-1/manifest-1.json"  # one revision per task
        elsewhere: list[str] = []
        worker = threading.Thread(target=lambda: elsewhere.append(ctx.manifest_key("run-1")))
        worker.start()
        worker.join()
        assert elsewhere == ["runs/run-1/manifest-2.json"]  # another thread is not this task
    with ctx.one_task():
        assert ctx.manifest_key("run-1") == "runs/run-1/manifest-2.json"
    assert ctx.manifest_key("run-1") == "runs/run-1/manifest-2.json"  # outside a task: every time


def test_a_task_whose_claim_brought_the_manifest_key_does_not_read_it_again(
    redis_client: redis.Redis, redis_server: RedisServer, tmp_path: Path
) -> None:
    ctx = ctxmod.Context(Settings(broker_url=redis_server.url, store=str(tmp_path / "store")))
    ctx.state.register("run-1", ["s1"], "runs/run-1/manifest-1.json", created="now")
    claim = ctx.state.claim("run-1", "s1", ShardState.QUEUED, ShardState.EXECUTING, "token", 30)
    assert claim is not None and claim.manifest_key is not None
    ctx.state.set_manifest_key("run-1", "runs/run-1/manifest-2.json")  # a resubmit after the claim
    with ctx.one_task():
        ctx.saw_manifest_key("run-1", claim.manifest_key)
        before = redis_client.info("commandstats").get("cmdstat_hget", {}).get("calls", 0)
        assert ctx.manifest_key("run-1") == "runs/run-1/manifest-1.json"  # the revision the claim saw
        assert redis_client.info("commandstats").get("cmdstat_hget", {}).get("calls", 0) == before
    ctx.saw_manifest_key("run-1", "runs/run-1/manifest-1.json")  # outside a task: nothing kept
    assert ctx.manifest_key("run-1") == "runs/run-1/manifest-2.json"
