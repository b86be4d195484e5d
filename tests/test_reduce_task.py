"""The reduce task: whatever happens to it, a submitter waiting for the run is released."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from engine.redis_server import RedisServer
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from producer.plan.planning import plan_run
from schemas.corpus import Corpus, EvalCase
from schemas.manifest import RunManifest, grade_key, manifest_key, outcome_key, result_key
from schemas.shard import SkillBundle
from worker import pipeline
from worker.context import Context


def test_a_reduce_that_crashes_still_releases_the_submitter_waiting_for_it(
    redis_server: RedisServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    corpus = Corpus(
        skill_name="s",
        evals=tuple(
            EvalCase(id=i, prompt="p", expected_output="-", files=(), assertions=("The agent runs x in the shell",))
            for i in (1, 2)
        ),
    )
    bundle = SkillBundle(skill="s", bundle_key="s-0", corpus_file="evals/s.evals.json", corpus=corpus)
    plan = plan_run("20260101-000000-0badf00d", [bundle], ["m"], judges=["j"])
    store = open_store(str(tmp_path / "store"))
    run_id = plan.run_id
    store.put(manifest_key(run_id), RunManifest(plan=plan, snapshots={}).model_dump_json().encode())
    state = RunState(redis_client)
    state.register(run_id, [s.shard_id for s in plan.shards], manifest_key(run_id), plan.created_at.isoformat())
    for shard in plan.shards:  # both shards "graded", but one grade record is damaged: the reducer raises
        store.put(outcome_key(run_id, shard.shard_id), b'{"state": "graded", "detail": ""}')
        store.put(grade_key(run_id, shard.shard_id), b"{damaged")
    ctx = Context(Settings(broker_url=redis_server.url, store=str(tmp_path / "store")))

    with pytest.raises(ValueError):
        pipeline.reduce_stored_run(ctx, run_id)

    assert state.reduced(run_id)  # wait_for_run returns instead of polling forever ...
    assert not store.exists(result_key(run_id))  # ... and, finding no result, reduces itself and shows the error
