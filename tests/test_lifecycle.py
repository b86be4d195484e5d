"""A shard's lifecycle on a worker: one lease from claim to transition, one rule from an error to a state."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from engine.broker import InProcessBroker, Message
from engine.keys import claims_field, run_keys
from engine.records import load_outcome, put_manifest
from engine.redis_server import RedisServer
from engine.settings import Settings
from engine.state import MAX_CLAIMS, RunState
from producer.plan.planning import plan_run
from schemas.constants import QUEUE_GRADE
from schemas.corpus import Corpus, EvalCase
from schemas.errors import (
    BadFixture,
    ConfigError,
    ExecutorFailed,
    FixtureNeedsGit,
    ModelCallFailed,
    NoIsolation,
    NoSandbox,
    SkillEvalError,
    StoreError,
)
from schemas.manifest import RunManifest, trajectory_key
from schemas.outcome import ShardOutcomeRecord
from schemas.shard import SkillBundle
from schemas.status import ShardState
from worker.context import Context
from worker.lifecycle import failure_outcome, shard_lease

S = ShardState


@pytest.mark.parametrize(
    ("err", "state", "stops_run"),
    [
        (NoIsolation("no workspace"), S.BLOCKED, True),
        (FixtureNeedsGit("base fixture"), S.BLOCKED, True),
        (NoSandbox("bwrap missing"), S.BLOCKED, True),
        (BadFixture("escapes"), S.BLOCKED, False),
    ],
)
def test_a_blocked_error_ends_the_shard_blocked_and_says_whether_it_stops_the_run(
    err: SkillEvalError, state: ShardState, stops_run: bool
) -> None:
    for leased in (S.EXECUTING, S.GRADING):
        outcome = failure_outcome(err, leased)
        assert outcome == ShardOutcomeRecord(state=state, detail=str(err), status=err.status, stops_run=stops_run)


def test_an_infra_error_ends_the_shard_in_its_own_state_whatever_the_phase() -> None:
    for leased in (S.EXECUTING, S.GRADING):
        assert failure_outcome(ExecutorFailed("exit 1"), leased).state is S.EXECUTOR_FAILED


@pytest.mark.parametrize("err", [ModelCallFailed("retries spent"), ConfigError("bad"), RuntimeError("boom")])
def test_any_other_error_is_the_phase_s_infra_failure_never_a_pass_or_fail(err: Exception) -> None:
    assert failure_outcome(err, S.EXECUTING).state is S.EXECUTOR_FAILED
    grading = failure_outcome(err, S.GRADING)
    assert grading.state is S.GRADER_DISPATCH_FAILED and not grading.stops_run
    if not isinstance(err, SkillEvalError):  # a crash names itself in the detail
        assert grading.detail == "grader-dispatch-failed: RuntimeError('boom')"


def _run(redis_client: redis.Redis, ctx: Context) -> tuple[str, str]:
    case = EvalCase(id=1, prompt="p", expected_output="-", files=(), assertions=("The agent runs x in the shell",))
    corpus = Corpus(skill_name="s", evals=(case, case.model_copy(update={"id": 2})))
    bundle = SkillBundle(skill="s", bundle_key="s-0", corpus_file="evals/s.evals.json", corpus=corpus)
    plan = plan_run("20260101-000000-00c0ffee", [bundle], ["m"], judges=["j"])
    key = put_manifest(ctx.store, RunManifest(plan=plan, snapshots={}))
    RunState(redis_client).register(plan.run_id, [s.shard_id for s in plan.shards], key, "2026-01-01T00:00:00")
    return plan.run_id, plan.shards[0].shard_id


def test_an_error_in_the_body_ends_the_shard_once_with_the_typed_outcome(
    redis_server: RedisServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ctx = Context(Settings(broker_url=redis_server.url, store=str(tmp_path / "store"), workdir=tmp_path / "w"))
    run_id, shard_id = _run(redis_client, ctx)
    broker = InProcessBroker()

    with shard_lease(ctx, broker, run_id, shard_id, S.QUEUED, S.EXECUTING) as lease:
        assert lease is not None and lease.manifest.plan.run_id == run_id
        raise BadFixture("evals/fixtures/x: escapes the workspace")

    assert ctx.state.get(run_id, shard_id) is S.BLOCKED
    assert load_outcome(ctx.store, run_id, shard_id) == ShardOutcomeRecord(
        state=S.BLOCKED,
        detail="BLOCKED_BAD_FIXTURE: evals/fixtures/x: escapes the workspace",
        status="BLOCKED_BAD_FIXTURE",
    )
    assert broker.messages == []  # one shard of two is terminal: no reduce yet

    with shard_lease(ctx, broker, run_id, shard_id, S.QUEUED, S.EXECUTING) as again:
        assert again is None  # a redelivered message claims nothing


def test_a_body_that_moves_the_shard_on_sends_its_next_task_and_a_later_error_is_not_the_shard_s(
    redis_server: RedisServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ctx = Context(Settings(broker_url=redis_server.url, store=str(tmp_path / "store"), workdir=tmp_path / "w"))
    run_id, shard_id = _run(redis_client, ctx)
    broker = InProcessBroker()

    with (
        pytest.raises(RuntimeError, match="after"),
        shard_lease(ctx, broker, run_id, shard_id, S.QUEUED, S.EXECUTING) as lease,
    ):
        assert lease is not None
        lease.advance(S.EXECUTED)
        raise RuntimeError("after the transition")

    assert ctx.state.get(run_id, shard_id) is S.EXECUTED
    assert load_outcome(ctx.store, run_id, shard_id) is None
    assert broker.messages == [Message(QUEUE_GRADE, run_id, shard_id)]


def test_a_shard_whose_end_the_store_refuses_is_given_up_naming_the_store_error_not_a_death(
    redis_server: RedisServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """The store refuses the trajectory, then the outcome naming that failure: nothing is recorded and
    the lease lapses. The claim that gives the shard up says which store error, not that a worker died."""
    ctx = Context(Settings(broker_url=redis_server.url, store=str(tmp_path / "store"), workdir=tmp_path / "w"))
    run_id, shard_id = _run(redis_client, ctx)
    blocked = [tmp_path / "store" / "runs" / run_id / folder for folder in ("trajectories", "attempts")]
    for path in blocked:
        path.write_text("")  # a file where the store's folder goes: every write under it is refused

    broker = InProcessBroker()
    with pytest.raises(StoreError), shard_lease(ctx, broker, run_id, shard_id, S.QUEUED, S.EXECUTING) as lease:
        assert lease is not None
        ctx.store.put(trajectory_key(run_id, shard_id), b"{}")
    assert ctx.state.get(run_id, shard_id) is S.EXECUTING  # nothing recorded: left to its lease
    assert ctx.state.expire_lease(run_id, shard_id, lease.token)
    for path in blocked:
        path.unlink()  # the store takes writes again
    redis_client.hset(run_keys(run_id).claims, claims_field(shard_id, S.EXECUTING.value), MAX_CLAIMS)

    with shard_lease(ctx, broker, run_id, shard_id, S.QUEUED, S.EXECUTING) as again:
        assert again is None  # given up: the body does not run a fourth time
    outcome = load_outcome(ctx.store, run_id, shard_id)
    assert outcome is not None and outcome.state is S.EXECUTOR_FAILED and outcome.status == "STORE_ERROR"
    assert outcome.detail.startswith(f"STORE_ERROR: cannot write {trajectory_key(run_id, shard_id)!r}")
    assert "died" not in outcome.detail
