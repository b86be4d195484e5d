"""Benchmark: plan and enqueue a sweep of many shards, and the Redis memory each queued shard costs.

Target: 100,000 shards planned, registered and published in at most 60 s, with at most
2 KB of Redis memory per queued shard (its message plus its state). No worker runs: the
figures are the producer's side alone, measured from planning to the last publish, against
a private redis-server. The corpus is generated: ``--cases`` cases x ``--models`` executor
models x ``--epochs`` epochs.

Run::

    .venv/bin/python bench/bench_enqueue.py --cases 100 --models 100 --epochs 10   # 100,000 shards
    .venv/bin/python bench/bench_enqueue.py --cases 100 --models 10 --epochs 10 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.redis_server import RedisServer
from engine.settings import Settings
from engine.state import RunState
from engine.store import LocalStore
from producer.corpus.repo import Repo
from producer.launch.cluster import task_sender
from producer.launch.submit import build_manifest, submit
from producer.plan.planning import new_run_id, plan_run
from schemas.constants import QUEUE_EXECUTE
from schemas.manifest import RunSettings
from tests.engine_support import SKILL, make_corpus_repo

TARGET_SECONDS_PER_100K = 60.0
TARGET_BYTES_PER_SHARD = 2048


def one_sweep(repo: Path, store_dir: Path, cases_models_epochs: tuple[int, int, int]) -> tuple[float, float, int]:
    """(seconds, Redis bytes per queued shard, shards) for one plan + submit on a fresh Redis."""
    _, models, epochs = cases_models_epochs
    server = RedisServer().start()
    try:
        client = redis.Redis.from_url(server.url)
        before = int(client.info("memory")["used_memory"])
        settings = Settings(broker_url=server.url, store=str(store_dir))
        start = time.monotonic()
        r = Repo(repo)
        bundles = [o.bundle for o in r.load_many(r.targets([SKILL], False)) if o.bundle]
        plan = plan_run(new_run_id(), bundles, [f"openai/m{i}" for i in range(models)], epochs=epochs)
        manifest = build_manifest(plan, r.root, LocalStore(store_dir), RunSettings(), out_dir="", skipped=[])
        enqueue = task_sender(settings, manifest)
        sent = submit(
            manifest,
            LocalStore(store_dir),
            RunState(client),
            lambda run, shard: enqueue.send(QUEUE_EXECUTE, run, shard),
            enqueue.batch,
        )
        elapsed = time.monotonic() - start
        assert client.llen(QUEUE_EXECUTE) == sent == len(plan.shards), "every shard must be on the queue"
        per_shard = (int(client.info("memory")["used_memory"]) - before) / sent
        return elapsed, per_shard, sent
    finally:
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-enqueue-") as tmp:
        repo = make_corpus_repo(Path(tmp) / "repo", cases=args.cases)
        runs = [
            one_sweep(repo, Path(tmp) / f"store-{i}", (args.cases, args.models, args.epochs))
            for i in range(args.repeat)
        ]
    seconds = statistics.median(r[0] for r in runs)
    per_shard = statistics.median(r[1] for r in runs)
    shards = runs[0][2]
    per_100k = seconds / shards * 100_000
    print(f"shards: {shards}  runs: {len(runs)}")
    print(f"plan + register + publish: {seconds:.1f} s median ({seconds / shards * 1e3:.3f} ms/shard)")
    print(f"  -> {per_100k:.1f} s per 100,000 shards (target {TARGET_SECONDS_PER_100K:.0f} s)")
    print(f"Redis memory per queued shard: {per_shard:.0f} bytes (target {TARGET_BYTES_PER_SHARD})")
    ok = per_100k <= TARGET_SECONDS_PER_100K and per_shard <= TARGET_BYTES_PER_SHARD
    print("PASS" if ok else "MISS")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
