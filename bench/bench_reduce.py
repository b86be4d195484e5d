"""Benchmark: reduce a run of a million stored outcomes by streaming its outcome segments.

Target: 1,000,000 stored outcomes reduced in at most 60 s and under 500 MB of memory on a
local store. The outcomes are generated (a sweep of ``--skills`` corpora x ``--cases`` cases
x ``--models`` models x ``--epochs`` epochs, three assertions per case; mostly graded, with
infra failures, blocked shards, judge ensembles and usage) and written as the workers write
them: compact outcome lines in segment objects of 2,500, plus the run's outline. The reduce
itself runs in a fresh child process, so its peak RSS (``ru_maxrss``, imports included) is
the reduce's alone.

``--s3`` writes the same run to a moto S3 server over HTTP and counts the requests the
reduce makes (moto serves about 85 requests per second here, so measure 10,000 outcomes and
extrapolate).

Run::

    .venv/bin/python bench/bench_reduce.py                                   # 1,000,000 outcomes, local
    .venv/bin/python bench/bench_reduce.py --epochs 50 --arms 2                # 1,000,000 with a no-skill arm
    .venv/bin/python bench/bench_reduce.py --cases 50 --models 10 --epochs 10 --s3   # 10,000 on moto
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.segments import SEGMENT_LINES, encode_segment, segment_key
from engine.store import ArtifactStore, open_store
from schemas.corpus import Corpus, EvalCase
from schemas.manifest import RunManifest, RunOutline, outline_key
from schemas.outcome import OutcomeLine
from schemas.shard import CURRENT, NO_SKILL, RunPlan, SkillBundle, shard_id_for
from schemas.status import ShardState

RUN_ID = "20261201-000000-0000beef"
TARGET_S, TARGET_MB = 60.0, 500.0


def outline(skills: int, cases: int, models: int, epochs: int, arms: int = 1) -> RunOutline:
    bundles = []
    for s in range(skills):
        evals = tuple(
            EvalCase(
                id=c,
                prompt=f"case {c}",
                expected_output="-",
                files=(),
                assertions=tuple(f"The agent runs step {c}.{k} in the shell" for k in range(3)),
            )
            for c in range(1, cases + 1)
        )
        name = f"skill-{s}"
        corpus = Corpus(skill_name=name, evals=evals)
        bundles.append(
            SkillBundle(skill=name, bundle_key=f"{name}-0", corpus_file=f"evals/{name}.evals.json", corpus=corpus)
        )
    plan = RunPlan(
        run_id=RUN_ID,
        bundles=tuple(bundles),
        models=tuple(f"provider/model-{m}" for m in range(models)),
        judges=("provider/judge-a", "provider/judge-b"),
        epochs=epochs,
        variants=(CURRENT, NO_SKILL)[:arms],
        shards=(),
    )
    count = arms * skills * cases * models * epochs
    return RunOutline(manifest=RunManifest(plan=plan, snapshots={}), shard_count=count)


def lines(o: RunOutline, seed: int = 7):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    plan = o.manifest.plan
    shards = (
        (variant, b, case, model, epoch)
        for variant in plan.variants
        for b in plan.bundles
        for case in b.corpus.evals
        for model in plan.models
        for epoch in range(plan.epochs)
    )
    for variant, b, case, model, epoch in shards:
        roll = rng.random()
        state = (
            ShardState.GRADED
            if roll < 0.93
            else ShardState.EXECUTOR_FAILED
            if roll < 0.97
            else ShardState.GRADER_MALFORMED
            if roll < 0.99
            else ShardState.BLOCKED
        )
        graded = state is ShardState.GRADED
        yield OutcomeLine(
            shard_id=shard_id_for(RUN_ID, variant, b.skill, case.id, model, epoch),
            variant=variant,
            skill=b.skill,
            case_id=case.id,
            model=model,
            epoch=epoch,
            state=state,
            status="" if graded else state.value,
            detail="" if graded else f"{state.value}: the model endpoint answered 500 three times",
            passed=[rng.random() < 0.7 for _ in range(3)] if graded else [],
            disagreed=[int(rng.random() < 0.1) for _ in range(3)] if graded else [],
            verified=(2, 2) if graded else (0, 0),
            agreement=(rng.random(), 1) if graded else (0.0, 0),
            unanimous=rng.random() if graded else None,
            usage=(rng.randint(2000, 40000), rng.randint(100, 3000), rng.randint(1, 12), rng.random() / 50),
            judge_usage={j: (3000, 200, 1, 0.001) for j in plan.judges} if graded else {},
            sandbox="bwrap",
            end_reason="completed",
            template_hashes={"executor": "e3b0c44298fc", "grader": "5feceb66ffc8"},
        )


def write_run(store: ArtifactStore, o: RunOutline) -> int:
    """The outline and the segments, as the workers leave them; the number of segments."""
    store.put(outline_key(RUN_ID), o.model_dump_json().encode())
    batch: list[bytes] = []
    segments = 0
    for line in lines(o):
        batch.append(line.model_dump_json().encode())
        if len(batch) == SEGMENT_LINES:
            segments += 1
            store.put(segment_key(RUN_ID, f"{segments:016d}-{segments:012d}"), encode_segment(batch))
            batch = []
    if batch:
        segments += 1
        store.put(segment_key(RUN_ID, f"{segments:016d}-{segments:012d}"), encode_segment(batch))
    return segments


def child(uri: str) -> None:
    """Reduce the stored run and print the figures as JSON (runs in its own process)."""
    requests = 0
    if uri.startswith("s3://"):
        import botocore.session  # noqa: F401  (count every HTTP request the store's client sends)
        from botocore.hooks import HierarchicalEmitter

        original = HierarchicalEmitter.emit

        def counting(self, event_name, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal requests
            if event_name.startswith("before-send."):
                requests += 1
            return original(self, event_name, **kwargs)

        HierarchicalEmitter.emit = counting  # type: ignore[method-assign]
    from engine.collect import StoredRun
    from reducer.from_store import run_result

    start = time.perf_counter()
    store = open_store(uri)
    # Every shard's line is in the segments: nothing to rebuild, so no count of ended shards is read.
    done = run_result(StoredRun(store, RUN_ID, ended=lambda: 0), stream_from=0)
    assert done.streamed
    seconds = time.perf_counter() - start
    s = done.result.skills[0]
    print(
        json.dumps(
            {
                "seconds": seconds,
                "lines": done.lines,
                "shards": done.shards,
                "requests": requests,
                "headline": s.headline,
                "verdict": done.result.verdict.value,
            }
        )
    )


def measure(uri: str) -> dict:  # type: ignore[type-arg]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = subprocess.run([sys.executable, __file__, "--child", uri], check=True, capture_output=True, text=True)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    figures["peak_mb"] = max(peak_kb, before) / 1024
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skills", type=int, default=2)
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--arms", type=int, choices=(1, 2), default=1, help="2: a no-skill arm beside (paired tests)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--s3", action="store_true", help="a moto S3 server over HTTP instead of a local folder")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    o = outline(args.skills, args.cases, args.models, args.epochs, args.arms)
    with tempfile.TemporaryDirectory(prefix="bench-reduce-") as tmp:
        server = None
        if args.s3:
            import boto3
            from moto.server import ThreadedMotoServer

            from engine.redis_server import free_port

            port = free_port()
            logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
            server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
            server.start()
            os.environ.update(
                AWS_ACCESS_KEY_ID="testing",
                AWS_SECRET_ACCESS_KEY="testing",
                AWS_DEFAULT_REGION="us-east-1",
                SKILL_EVAL_S3_ENDPOINT=f"http://127.0.0.1:{port}",
            )
            boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}").create_bucket(Bucket="bench")
            uri = "s3://bench/store"
        else:
            uri = str(Path(tmp) / "store")
        started = time.perf_counter()
        segments = write_run(open_store(uri), o)
        print(f"{o.shard_count:,} outcomes in {segments:,} segments written in {time.perf_counter() - started:.1f} s")
        runs = [measure(uri) for _ in range(args.repeat)]
        if server is not None:
            server.stop()
    seconds = statistics.median(r["seconds"] for r in runs)
    peak = statistics.median(r["peak_mb"] for r in runs)
    last = runs[-1]
    assert last["shards"] == o.shard_count, last
    print(
        f"reduce: {seconds:.1f} s median of {args.repeat} ({[round(r['seconds'], 1) for r in runs]}), "
        f"{seconds / o.shard_count * 1e6:.1f} us per outcome; peak RSS {peak:.0f} MB (imports included)"
    )
    if args.s3:
        fixed = last["requests"] - segments  # the outline, one listing page, calibration records
        per_million = fixed + -(-1_000_000 // SEGMENT_LINES)
        print(
            f"store requests: {last['requests']} for {o.shard_count:,} outcomes ({segments} segment reads + "
            f"{fixed} others); a million outcomes: about {per_million:,} "
            f"(one read per {SEGMENT_LINES:,}-line segment; a listing page holds 1,000 segments)"
        )
    elif o.shard_count >= 1_000_000:
        met = seconds <= TARGET_S and peak < TARGET_MB
        print(f"target: <= {TARGET_S:.0f} s and < {TARGET_MB:.0f} MB for 1,000,000: {'met' if met else 'MISSED'}")
    print(f"result: {last['headline']} ({last['verdict']})")


if __name__ == "__main__":
    main()
