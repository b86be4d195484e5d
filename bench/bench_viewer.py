"""Benchmark: the viewer's answers for a store holding a 100,000-shard run, and a shard with a 1 MB trajectory.

Targets (server side): the runs list and a run's overview in under 300 ms with a 100,000-shard run
in the store; a shard page in under 200 ms for a 1 MB trajectory. The big run is written as the
workers leave one (its outline and its outcome segments, as ``bench_reduce.py`` writes them) and
reduced by the real streamed reducer, whose result the viewer reads; the shard run is one shard
with its real records (manifest, outcome, grade, trajectory). Requests go through the ASGI app
in-process (Starlette's test client), so the figures are the server's time without the network.

Run::

    .venv/bin/python bench/bench_viewer.py            # 100,000 shards (20 corpora x 50 cases x 10 models x 10 epochs)
    .venv/bin/python bench/bench_viewer.py --epochs 1 # 10,000 shards, quicker
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from starlette.testclient import TestClient

from bench.bench_reduce import RUN_ID, outline, write_run
from engine.collect import StoredRun
from engine.records import put_manifest, put_outcome, put_result
from engine.store import ArtifactStore, open_store
from reducer.from_store import run_result
from schemas.corpus import Corpus, EvalCase
from schemas.manifest import RunManifest, grade_key, trajectory_key
from schemas.outcome import ShardOutcomeRecord
from schemas.shard import CURRENT, RunPlan, Shard, SkillBundle, shard_id_for
from schemas.status import ShardState
from schemas.trajectory import AssistantEvent, ToolCallEvent, ToolResultEvent, Trajectory
from schemas.verdict import AssertionVerdict, JudgeAnswer, ShardGrade
from viewer.app import create_app

SHARD_RUN = "20261202-000000-00001mb0"
TARGET_LIST_MS, TARGET_SHARD_MS = 300.0, 200.0


def write_shard_run(store: ArtifactStore, size: int = 1_000_000) -> str:
    """One graded shard whose trajectory is about ``size`` bytes of tool output; its id."""
    texts = ("The agent runs make test", "The agent reads the log", "The agent never runs rm -rf")
    cases = tuple(EvalCase(id=i, prompt="p", expected_output="-", files=(), assertions=texts) for i in (1, 2))
    corpus = Corpus(skill_name="big", evals=cases)
    bundle = SkillBundle(skill="big", bundle_key="big-0", corpus_file="evals/big.evals.json", corpus=corpus)
    sid = shard_id_for(SHARD_RUN, CURRENT, "big", 1, "provider/model-0", 0)
    shard = Shard(
        shard_id=sid, run_id=SHARD_RUN, variant=CURRENT, skill="big", case_id=1, model="provider/model-0", epoch=0
    )
    plan = RunPlan(run_id=SHARD_RUN, bundles=(bundle,), models=("provider/model-0",), judges=("j",), shards=(shard,))
    put_manifest(store, RunManifest(plan=plan, snapshots={}))
    events: list[AssistantEvent | ToolCallEvent | ToolResultEvent] = []
    line = "PASS tests/test_module.py::test_case_number_%06d ok (0.01s)\n"
    n = 0
    while sum(len(getattr(e, "output", "")) for e in events) < size:
        events.append(ToolCallEvent(call_id=f"c{n}", name="shell", arguments={"command": f"make test PART={n}"}))
        events.append(ToolResultEvent(call_id=f"c{n}", output="".join(line % (n * 100 + i) for i in range(100))))
        n += 1
    events.append(AssistantEvent(text="All tests pass."))
    trajectory = Trajectory(shard_id=sid, skill="big", case_id=1, model="provider/model-0", events=events)
    store.put(trajectory_key(SHARD_RUN, sid), trajectory.model_dump_json().encode())
    verdicts = [
        AssertionVerdict(text=texts[0], passed=True, evidence='shell({"command": "make test PART=3"})'),
        AssertionVerdict(text=texts[1], passed=True, evidence="test_case_number_000042 ok"),
        AssertionVerdict(text=texts[2], passed=False, evidence="absent: no rm"),
    ]
    grade = ShardGrade(
        shard_id=sid,
        state=ShardState.GRADED,
        verdicts=verdicts,
        judges=[JudgeAnswer(judge="j", state=ShardState.GRADED, verdicts=verdicts, raw_answers=["{...}"])],
    )
    store.put(grade_key(SHARD_RUN, sid), grade.model_dump_json().encode())
    put_outcome(store, SHARD_RUN, sid, ShardOutcomeRecord(state=ShardState.GRADED))
    return sid


LOCAL = "http://127.0.0.1"
"""The viewer answers only its bind host and loopback names, as a browser on this machine asks."""


def timed(client: TestClient, path: str, repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(path)
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (path, response.status_code, response.text[:300])
    return {"first_ms": samples[0], "median_ms": statistics.median(samples), "max_ms": max(samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skills", type=int, default=20)
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warm-s", type=float, default=8.0, help="Seconds the started viewer gets to warm up.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(str(Path(tmp) / "store"))
        big = outline(args.skills, args.cases, args.models, args.epochs)
        start = time.perf_counter()
        write_run(store, big)
        put_result(store, run_result(StoredRun(store, big.manifest.plan.run_id, ended=lambda: 0), stream_from=0).result)
        print(f"wrote and reduced a {big.shard_count:,}-shard run in {time.perf_counter() - start:.1f} s")
        sid = write_shard_run(store)
        size = len(store.get(trajectory_key(SHARD_RUN, sid)))
        print(f"shard run: one trajectory of {size / 1e6:.2f} MB")
        cold = TestClient(create_app(store), base_url=LOCAL)  # a fresh viewer: nothing cached
        figures: dict[str, tuple[dict[str, float], float | None]] = {
            "run overview, cold (first request of a fresh viewer)": (
                timed(cold, f"/api/runs/{RUN_ID}", 1),
                TARGET_LIST_MS,
            ),
        }
        unwarmed = TestClient(create_app(store), base_url=LOCAL)
        figures["run page, failing filter, no warm-up (builds the shard index)"] = (
            timed(unwarmed, f"/runs/{RUN_ID}?failing=1", 1),
            None,
        )
        client = TestClient(create_app(store), base_url=LOCAL)
        with client:  # starts the app: its warm-up reads the runs' results in the background
            time.sleep(args.warm_s)
        figures |= {
            "runs list (GET /api/runs)": (timed(client, "/api/runs", args.repeat), TARGET_LIST_MS),
            "runs page (GET /)": (timed(client, "/", args.repeat), TARGET_LIST_MS),
            "run overview (GET /api/runs/{big})": (timed(client, f"/api/runs/{RUN_ID}", args.repeat), TARGET_LIST_MS),
            "shard page, 1 MB trajectory": (
                timed(client, f"/runs/{SHARD_RUN}/shards/{sid}", args.repeat),
                TARGET_SHARD_MS,
            ),
            "shard API, 1 MB trajectory": (
                timed(client, f"/api/runs/{SHARD_RUN}/shards/{sid}", args.repeat),
                TARGET_SHARD_MS,
            ),
            "run page with shard list, failing filter (index built by the warm-up)": (
                timed(client, f"/runs/{RUN_ID}?failing=1", args.repeat),
                None,
            ),
            "shard list API, page 40 of a search": (
                timed(client, f"/api/runs/{RUN_ID}/shards?q=step+7.&offset=2000&limit=50", args.repeat),
                None,
            ),
        }
        for name, (f, target) in figures.items():
            verdict = "" if target is None else ("  OK" if f["median_ms"] < target else f"  OVER {target:.0f} ms")
            times = f"first {f['first_ms']:.0f} ms, median {f['median_ms']:.1f} ms, max {f['max_ms']:.0f} ms"
            print(f"{name}: {times}{verdict}")


if __name__ == "__main__":
    main()
