"""Benchmark: how fast ``skill-eval run`` reaches its first model call, and how its memory grows
with concurrency, on the embedded cluster.

For each concurrency C a run of 2 x C shards (at least 4) (each three shell tool calls and an answer, then a
judge call, 1 s per model call) keeps C shards in flight for most of its life. Per C, medians of
``--repeat`` runs: seconds from the command's start to the first model request, and the peak
memory of the command's whole process tree (RSS and PSS, see bench/proctree.py). Then the growth
per extra shard in flight between the smallest and the largest C.

Targets: the first model call within 5 s at any concurrency; at most 600 MB at concurrency 16;
at most 20 MB more per extra shard in flight.

``--warm``: every run takes the warm spare the run before it left (producer/launch/warm.py), as a
user's second and later commands do when the spare is on; its process counts in the memory.

Run::

    .venv/bin/python bench/bench_startup.py --concurrency 1 8 16 32 --repeat 3
    .venv/bin/python bench/bench_startup.py --concurrency 1 8 16 32 --repeat 3 --warm
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_pipeline import run_command, stop_spares, work_root, workload
from bench.bytecode import compile_sources
from testkit.offline_server import OfflineModelServer
from tests.engine_support import make_corpus_repo

TARGET_FIRST_CALL_S = 5.0
TARGET_MB_AT_16 = 600.0
TARGET_MB_PER_SHARD = 20.0
TOOL_CALLS = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 16, 32])
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warm", action="store_true", help="each run takes the warm spare the one before left")
    args = parser.parse_args(argv)
    compile_sources()

    rows: dict[int, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="skill-eval-startup-") as tmp, work_root() as work:
        root = Path(tmp)
        with OfflineModelServer(workload(args.latency, TOOL_CALLS)) as model:
            for c in sorted(args.concurrency):
                repo = make_corpus_repo(root / f"repo-{c}", cases=max(2, c))  # a corpus has at least 2 cases
                runs = [
                    run_command(
                        repo,
                        root,
                        work,
                        model,
                        epochs=2,
                        workers=c,
                        latency_s=args.latency,
                        turns=TOOL_CALLS,
                        warm=args.warm,
                    )
                    for _ in range(args.repeat)
                ]
                first = statistics.median(r.first_call_s for r in runs)
                rss = statistics.median(r.peak_rss_mb for r in runs)
                pss = statistics.median(r.peak_pss_mb for r in runs)
                rows[c] = (first, rss, pss)
                each = ", ".join(f"{r.first_call_s:.2f}" for r in runs)
                print(
                    f"concurrency {c:3d}: first model call {first:5.2f} s after the command started (runs: {each});"
                    f" peak {rss:4.0f} MB RSS / {pss:4.0f} MB PSS",
                    flush=True,
                )
        stop_spares(root)
    fast = all(first <= TARGET_FIRST_CALL_S for first, _, _ in rows.values())
    ok = fast
    lo, hi = min(rows), max(rows)
    if hi > lo:
        per_rss = (rows[hi][1] - rows[lo][1]) / (hi - lo)
        per_pss = (rows[hi][2] - rows[lo][2]) / (hi - lo)
        ok = ok and per_rss <= TARGET_MB_PER_SHARD
        print(
            f"growth per extra shard in flight ({lo} -> {hi}): {per_rss:.1f} MB RSS, {per_pss:.1f} MB PSS"
            f" (target <= {TARGET_MB_PER_SHARD:g})"
        )
    if 16 in rows:
        ok = ok and rows[16][1] <= TARGET_MB_AT_16
        print(f"at concurrency 16: {rows[16][1]:.0f} MB RSS (target <= {TARGET_MB_AT_16:g})")
    print(f"first model call within {TARGET_FIRST_CALL_S:g} s at every concurrency: {'yes' if fast else 'no'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
