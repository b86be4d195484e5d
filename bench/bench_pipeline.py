"""Benchmark: whole runs through the embedded cluster (private Redis + ``celery worker`` processes +
bwrap sandbox + the offline model server over HTTP), timed from submit to the reduced result.

Two cases:

* ``instant``: the scripted executor answers at once and the judge decides at once; the figure is
  shards per second end to end. Target: 10 shards/s or more for 500 shards on 2 cores.
* ``latency``: every model call takes ``--latency`` seconds; the figure is wall time over the
  ideal ``calls x latency / concurrency``. Target: 1.2 or less.

Each shard makes two model calls (one executor turn, one judge call). A generated corpus of
``--cases`` cases is run for ``--epochs`` epochs. The workers are started before the clock
starts (a cluster is already up); ``--repeat`` runs give a median.

Run::

    .venv/bin/python bench/bench_pipeline.py instant --cases 50 --epochs 10 --workers 2
    .venv/bin/python bench/bench_pipeline.py latency --cases 16 --epochs 6 --workers 16 --latency 1
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.settings import Settings, default_work_root
from engine.state import RunState
from producer.embedded import EmbeddedCluster
from schemas.status import ShardState
from testkit.offline_server import OfflineModelServer
from tests.engine_support import make_corpus_repo, scenario, submit_run, wait_until

TARGET_SHARDS_PER_S = 10.0
TARGET_LATENCY_RATIO = 1.2
CALLS_PER_SHARD = 2


@contextlib.contextmanager
def work_root() -> Iterator[Path]:
    """A private folder under the product's default work root (a tmpfs when there is one)."""
    default_work_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-", dir=default_work_root()) as work:
        yield Path(work)


def one_run(cluster: EmbeddedCluster, repo: Path, api_base: str, epochs: int) -> tuple[float, int]:
    """Submit a run and wait for its reduced result; (seconds, shards)."""
    settings = cluster.settings
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    start = time.monotonic()
    manifest = submit_run(repo, settings, api_base, epochs=epochs)
    run_id = manifest.plan.run_id
    wait_until(lambda: state.reduced(run_id), 3600, poll_s=0.05, what="run reduced")
    elapsed = time.monotonic() - start
    states = state.states(run_id)
    bad = {k: v for k, v in states.items() if v is not ShardState.GRADED}
    if bad:
        raise SystemExit(f"run {run_id}: shards not graded: {len(bad)} e.g. {next(iter(bad.items()))}")
    return elapsed, len(states)


def warm_up(cluster: EmbeddedCluster, root: Path, api_base: str, workers: int) -> None:
    """One small run so every worker process has imported its modules and unpacked the snapshot."""
    repo = make_corpus_repo(root / "warm", cases=max(2, workers))
    one_run(cluster, repo, api_base, epochs=1)


def profile(cases: int, epochs: int, top: int = 30) -> int:
    """cProfile of execute + grade for every shard of a run, in this process (no Celery): where a shard's time goes."""
    import cProfile
    import pstats

    from engine.redis_server import RedisServer
    from worker import pipeline
    from worker.context import Context

    with tempfile.TemporaryDirectory(prefix="skill-eval-prof-") as tmp, RedisServer() as server, work_root() as work:
        root = Path(tmp)
        repo = make_corpus_repo(root / "repo", cases=cases)
        settings = Settings(store=str(root / "store"), workdir=work, broker_url=server.url)
        with OfflineModelServer(scenario()) as model:
            manifest = submit_run(repo, settings, model.base_url, epochs=epochs)
            redis.Redis.from_url(server.url).delete("celery", "execute")  # the workers here are us
            ctx = Context(settings)
            run_id = manifest.plan.run_id
            shards = [s.shard_id for s in manifest.plan.shards]
            pipeline.execute_shard(ctx, lambda *a: None, run_id, shards[0])  # warm: imports, snapshot unpack
            pipeline.grade_shard(ctx, lambda *a: None, run_id, shards[0])
            prof = cProfile.Profile()
            start = time.monotonic()
            prof.enable()
            for shard_id in shards[1:]:
                pipeline.execute_shard(ctx, lambda *a: None, run_id, shard_id)
                pipeline.grade_shard(ctx, lambda *a: None, run_id, shard_id)
            prof.disable()
            elapsed = time.monotonic() - start
    n = len(shards) - 1
    print(f"{n} shards in one process: {elapsed / n * 1000:.1f} ms per shard (execute + grade)")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=["instant", "latency", "profile"])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the embedded cluster")
    parser.add_argument("--latency", type=float, default=1.0, help="latency case: seconds per model call")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)

    if args.case == "profile":
        return profile(args.cases, args.epochs)
    latency = args.latency if args.case == "latency" else 0.0
    with tempfile.TemporaryDirectory(prefix="skill-eval-bench-") as tmp, work_root() as work:
        root = Path(tmp)
        repo = make_corpus_repo(root / "repo", cases=args.cases)
        settings = Settings(store=str(root / "store"), workdir=work, broker_url=None)
        with (
            OfflineModelServer(scenario(executor_delay_s=latency, judge_delay_s=latency)) as model,
            EmbeddedCluster(settings, workers=args.workers, log_path=root / "worker.log") as cluster,
        ):
            warm_up(cluster, root, model.base_url, args.workers)
            times = []
            for i in range(args.repeat):
                elapsed, shards = one_run(cluster, repo, model.base_url, args.epochs)
                times.append(elapsed)
                print(f"run {i + 1}: {shards} shards in {elapsed:.1f} s ({shards / elapsed:.1f} shards/s)", flush=True)
            if not cluster.alive():
                print(cluster.log_tail(), file=sys.stderr)
                return 1
    median = statistics.median(times)
    print(f"workers={args.workers} shards={shards} median={median:.2f} s")
    if args.case == "instant":
        rate = shards / median
        print(f"instant model: {rate:.1f} shards/s (target >= {TARGET_SHARDS_PER_S:.0f})")
        return 0 if rate >= TARGET_SHARDS_PER_S else 1
    ideal = shards * CALLS_PER_SHARD * latency / args.workers
    ratio = median / ideal
    print(
        f"latency {latency:g} s: ideal {ideal:.1f} s = {shards * CALLS_PER_SHARD} calls x {latency:g} s"
        f" / {args.workers} workers; wall/ideal {ratio:.2f} (target <= {TARGET_LATENCY_RATIO})"
    )
    return 0 if ratio <= TARGET_LATENCY_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
