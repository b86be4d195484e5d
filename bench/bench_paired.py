"""Benchmark: median time to reduce a two-arm run with its paired statistics (target: under 2 s).

Usage::

    .venv/bin/python bench/bench_paired.py [--cases 200] [--models 2] [--epochs 5] [--repeat 5]

Builds a run of ``cases x models x epochs`` shards in each of two arms (current and no
skill), three assertions per case, verdicts drawn from a seeded generator, and times
``reduce_run`` (rates, gates, pairing, the exact sign-flip test, the score interval per
comparison, Holm, assertion quality). Prints the median and the slowest run;
exits 1 when the median misses the target.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from producer.plan.planning import plan_run
from reducer.stream import reduce_run
from schemas.corpus import Corpus, EvalCase
from schemas.shard import CURRENT, NO_SKILL, SkillBundle
from schemas.shard_outcome import ShardOutcome
from schemas.status import ShardState
from schemas.verdict import AssertionVerdict, ShardGrade

TARGET_S = 2.0


def main() -> int:
    args = argparse.ArgumentParser()
    args.add_argument("--cases", type=int, default=200)
    args.add_argument("--models", type=int, default=2)
    args.add_argument("--epochs", type=int, default=5)
    args.add_argument("--repeat", type=int, default=5)
    opts = args.parse_args()
    texts = tuple(f"The agent runs step {k} in the shell" for k in range(3))
    cases = tuple(
        EvalCase(id=i, prompt=f"p{i}", expected_output="e", files=(), assertions=texts)
        for i in range(1, opts.cases + 1)
    )
    bundle = SkillBundle(
        skill="s",
        bundle_key="s-000000000000",
        corpus_file="evals/s.evals.json",
        corpus=Corpus(skill_name="s", evals=cases),
    )
    models = [f"m{i}" for i in range(opts.models)]
    plan = plan_run("20260101-000000-00000000", [bundle], models, epochs=opts.epochs, variants=(CURRENT, NO_SKILL))
    rng = random.Random(1)
    outcomes = {}
    for sh in plan.shards:
        p = 0.7 if sh.variant == CURRENT else 0.5
        verdicts = [AssertionVerdict(text=t, passed=rng.random() < p, evidence="q") for t in texts]
        outcomes[sh.shard_id] = ShardOutcome(
            sh, ShardState.GRADED, grade=ShardGrade(shard_id=sh.shard_id, state=ShardState.GRADED, verdicts=verdicts)
        )
    times = []
    for _ in range(opts.repeat):
        start = time.perf_counter()
        result = reduce_run(plan, outcomes, require_uplift=0.0)
        times.append(time.perf_counter() - start)
    overall = next(c for c in result.comparisons if c.model is None)
    median = statistics.median(times)
    print(
        f"{len(plan.shards)} shards ({opts.cases} cases x {opts.models} models x {opts.epochs} epochs x 2 arms): "
        f"reduce median {median:.2f} s, slowest {max(times):.2f} s; test {overall.test}, "
        f"uplift {100 * (overall.difference or 0):+.1f} pts "
        f"[{100 * (overall.low or 0):+.1f}, {100 * (overall.high or 0):+.1f}]"
    )
    return 0 if median <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
