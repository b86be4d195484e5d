"""Outcome segments through a real Redis and store, and a run reduced from them end to end.

Each line lands in exactly one sealed segment whatever the interleaving of writers; a writer
that died between cutting a segment and storing it loses nothing; lines Redis lost are
rebuilt from the full records; agent text cannot split or forge a line; and a real run
reduced from its segments reports what the full-record reduce reports.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from engine.collect import StoredRun, stream_outcome_lines
from engine.keys import segment_keys
from engine.records import load_outline, load_result, put_manifest, put_outcome
from engine.segments import SegmentWriter, segment_keys_in_store
from engine.store import ArtifactStore, open_store
from reducer.from_store import Reduced, run_result
from schemas.manifest import RunManifest, grade_key
from schemas.outcome import OutcomeLine, ShardOutcomeRecord
from schemas.report import RunResult
from schemas.shard_outcome import ShardOutcome, outcome_line_of
from schemas.status import ShardState
from schemas.verdict import AssertionVerdict, ShardGrade
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, git_init, new_repo, write_skill
from tests.test_e2e_run import DUO, DUO_RULES, ran, use
from tests.test_reducer import bundle, plan_for


def reduce_streamed(store: ArtifactStore, run_id: str, ended: int) -> Reduced:
    """The streamed reduce, told ``ended`` shards have ended (the run state's count)."""
    reduced = run_result(StoredRun(store, run_id, ended=lambda: ended), stream_from=0)
    assert reduced.streamed
    return reduced


def reduce_from_store(store: ArtifactStore, run_id: str) -> RunResult:
    """The reduce that keeps every shard's row."""
    reduced = run_result(StoredRun(store, run_id), stream_from=10**9)
    assert not reduced.streamed
    return reduced.result


def _line(shard_id: str, detail: str = "", state: ShardState = ShardState.EXECUTOR_FAILED) -> OutcomeLine:
    return OutcomeLine(
        shard_id=shard_id, variant="current", skill="s", case_id=1, model="m", epoch=0, state=state, detail=detail
    )


def test_every_line_lands_in_exactly_one_segment_whatever_the_writers_interleaving(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    store = open_store(str(tmp_path / "store"))
    writers = [SegmentWriter(redis_client, store, lines_per_segment=50) for _ in range(4)]

    def push(w: SegmentWriter, first: int) -> None:
        for i in range(first, first + 500):
            w.push("r1", _line(f"sh{i:05d}"))

    threads = [threading.Thread(target=push, args=(w, n * 500)) for n, w in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sealed_before_flush = len(segment_keys_in_store(store, "r1"))
    writers[0].flush("r1")
    ids = [line.shard_id for line in stream_outcome_lines(store, "r1")]
    assert sealed_before_flush == 40  # 2,000 lines / 50: every full segment was sealed by its filler
    assert sorted(ids) == [f"sh{i:05d}" for i in range(2000)]  # each exactly once
    left = redis_client.keys(segment_keys("r1").lines + "*")
    assert left == [segment_keys("r1").seq.encode()]  # nothing but the counter is left in Redis


def test_a_segment_cut_by_a_writer_that_died_before_storing_it_is_sealed_by_the_flush(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    store = open_store(str(tmp_path / "store"))
    writer = SegmentWriter(redis_client, store, lines_per_segment=3)
    writer.seal = lambda run_id, segment_id: None  # type: ignore[method-assign]  # dies right after the cut
    for i in range(7):
        writer.push("r2", _line(f"s{i}"))
    assert segment_keys_in_store(store, "r2") == []
    SegmentWriter(redis_client, store, lines_per_segment=3).flush("r2")
    assert len(segment_keys_in_store(store, "r2")) == 3
    assert [x.shard_id for x in stream_outcome_lines(store, "r2")] == [f"s{i}" for i in reversed(range(7))]


def test_agent_text_in_a_detail_cannot_split_a_line_or_forge_another_shard(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    store = open_store(str(tmp_path / "store"))
    forged = json.dumps(_line("victim", state=ShardState.GRADED).model_dump(mode="json"))
    writer = SegmentWriter(redis_client, store, lines_per_segment=2)
    writer.push("r3", _line("attacker", detail=f"boom\n{forged}\r\n{forged}\u2028"))
    writer.flush("r3")
    (key,) = segment_keys_in_store(store, "r3")
    raw = store.get(key)
    assert raw.count(b"\n") == 1
    assert [(x.shard_id, x.state) for x in stream_outcome_lines(store, "r3")] == [
        ("attacker", ShardState.EXECUTOR_FAILED)
    ]


def test_the_newest_line_of_a_shard_wins_and_lines_redis_lost_are_rebuilt_from_the_records(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    store = open_store(str(tmp_path / "store"))
    plan = plan_for([bundle("s", (1, 1, 1, 1))], models=["m"], epochs=2)
    manifest = RunManifest(plan=plan, snapshots={})
    put_manifest(store, manifest)
    writer = SegmentWriter(redis_client, store, lines_per_segment=3)
    outcomes = {}
    for n, shard in enumerate(plan.shards):
        grade = ShardGrade(
            shard_id=shard.shard_id,
            state=ShardState.GRADED,
            verdicts=[AssertionVerdict(text="a", passed=n % 3 == 0, evidence="q")],
        )
        record = ShardOutcomeRecord(state=ShardState.GRADED)
        put_outcome(store, plan.run_id, shard.shard_id, record)
        store.put(grade_key(plan.run_id, shard.shard_id), grade.model_dump_json().encode())
        outcomes[shard.shard_id] = ShardOutcome(shard, ShardState.GRADED, grade=grade)
        if n < 6:
            # An earlier attempt that failed, then the regraded one: the later line must win.
            writer.push(plan.run_id, outcome_line_of(ShardOutcome(shard, ShardState.GRADER_MALFORMED)))
            writer.push(plan.run_id, outcome_line_of(outcomes[shard.shard_id]))
    writer.flush(plan.run_id)  # shards 6 and 7 never pushed a line (Redis lost them)
    outline = load_outline(store, plan.run_id)
    assert outline is not None and outline.shard_count == 8 and outline.manifest.plan.shards == ()

    streamed = reduce_streamed(store, outline.manifest.plan.run_id, ended=8)
    full = reduce_from_store(store, plan.run_id)
    assert (streamed.lines, streamed.shards, streamed.rebuilt) == (12, 8, 2)
    assert streamed.result.skills[0].behavioural == full.skills[0].behavioural
    assert streamed.result.skills[0].infra == full.skills[0].infra
    assert streamed.result.skills[0].not_graded == 0
    # With no count of ended shards nothing is rebuilt: the two shards count as not ended.
    assert reduce_streamed(store, plan.run_id, ended=0).result.skills[0].not_graded == 2


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer({"rules": []}) as s:
        yield s


def test_a_run_reduced_from_its_segments_reports_what_the_full_records_give(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    env = Env(tmp_path / "e2e", server.base_url, extra={"SKILL_EVAL_STREAM_REDUCE_SHARDS": "1"})
    env.base.mkdir()
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "duo", DUO)
    git_init(repo)
    use(server, DUO_RULES, [ran("duo-one-a"), ran("duo-one-b"), ran("duo-two-a")])

    args = ("--epochs", "2", "--fail-under", "0.8")
    res = env.cli(*env.run_args(repo, "duo", *args, models=("openai/exec-a", "openai/exec-b")))

    assert res.code == 0, res.stdout + res.stderr
    assert "result: 10/12 (83.3%)  PASS" in res.stdout  # the same figures as the full-record run of this corpus
    assert "leaderboard (composite): openai/exec-a 100.0%, openai/exec-b 75.0%" in res.stdout
    store = open_store(str(env.store))
    result = load_result(store, res.run_id)
    assert result is not None
    assert result.skills[0].runs == []  # reduced from the segments, not from the per-shard records
    assert len(list(stream_outcome_lines(store, res.run_id))) == 8
    outline = load_outline(store, res.run_id)
    assert outline is not None
    full = reduce_from_store(store, res.run_id)
    streamed = result.model_dump(mode="json")
    expected = full.model_dump(mode="json")
    for doc in (streamed, expected):
        for s in doc["skills"]:
            s["runs"] = []
    assert streamed == expected
    # `skill-eval report` on the run reduces from the segments too, from the store alone, with the
    # threshold the run was submitted with.
    again = env.cli("report", res.run_id, "--store", str(env.store), "--out", str(env.base / "again"))
    assert again.code == 0, again.stdout + again.stderr
    assert "result: 10/12 (83.3%)  PASS" in again.stdout and "threshold: 0.8 (--fail-under)" in again.stdout
    rereported = load_result(store, res.run_id)
    assert rereported is not None and rereported.model_dump(mode="json") == result.model_dump(mode="json")


def test_segments_cut_after_redis_lost_its_counter_still_sort_after_the_earlier_ones(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    store = open_store(str(tmp_path / "store"))
    writer = SegmentWriter(redis_client, store, lines_per_segment=2)
    for i in range(4):
        writer.push("r4", _line(f"old{i}"))
    redis_client.flushall()  # a Redis without persistence restarted: the counter starts again at 1
    for i in range(4):
        writer.push("r4", _line(f"new{i}"))
    newest_first = [x.shard_id for x in stream_outcome_lines(store, "r4")]
    assert newest_first == ["new3", "new2", "new1", "new0", "old3", "old2", "old1", "old0"]


def test_an_unreadable_line_is_left_out_and_its_shard_read_from_its_records(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    store = open_store(str(tmp_path / "store"))
    plan = plan_for([bundle("s", (1, 1))], models=["m"])
    manifest = RunManifest(plan=plan, snapshots={})
    put_manifest(store, manifest)
    writer = SegmentWriter(redis_client, store)
    for shard in plan.shards:
        record = ShardOutcomeRecord(state=ShardState.EXECUTOR_FAILED, detail="executor-failed: x")
        put_outcome(store, plan.run_id, shard.shard_id, record)
        writer.push(plan.run_id, outcome_line_of(ShardOutcome(shard, record.state, detail=record.detail)))
    writer.flush(plan.run_id)
    (key,) = segment_keys_in_store(store, plan.run_id)
    first, second = store.get(key).splitlines()
    store.put(key, first + b"\n" + second[: len(second) // 2] + b"\n")  # a torn second line
    outline = load_outline(store, plan.run_id)
    assert outline is not None
    streamed = reduce_streamed(store, plan.run_id, ended=2)
    assert (streamed.unreadable, streamed.rebuilt, streamed.shards) == (1, 1, 2)
    assert streamed.result.skills[0].infra["executor-failed"] == 2
