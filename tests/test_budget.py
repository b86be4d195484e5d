"""Run budgets: a token or cost cap enforced fleet-wide by reservation, shards cut off as
``budget-exhausted`` (never behaviour), and ``resubmit`` continuing after the cap is raised.

Against a real redis-server, real ``celery worker`` processes and the offline model server.
"""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest
import redis
from rich.console import Console

from engine.budget import CREDIT_RECHECK_S, Reservation, RunBudget
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from producer.launch.cluster import task_sender
from producer.launch.resubmit import parse_only, resubmit_run
from producer.launch.submit import submit
from producer.results.stored_run import rereport
from schemas.constants import QUEUE_EXECUTE
from schemas.errors import ConfigError
from schemas.manifest import AgentBudget, RunManifest, manifest_key, trajectory_key
from schemas.outcome import ShardOutcomeRecord
from schemas.status import ShardState
from schemas.verdict import ShardGrade
from testkit.offline_server import OfflineModelServer
from tests.engine_support import (
    JUDGE,
    WorkerNode,
    make_corpus_repo,
    plan_manifest,
    scenario,
    wait_until,
)


def test_reservations_never_let_spend_pass_the_cap_however_many_callers_race(settings: Settings) -> None:
    client = redis.Redis.from_url(settings.broker_url or "")
    budget = RunBudget(client, "r")
    budget.set_caps(max_tokens=10_000, max_cost_usd=None)
    granted: list[Reservation] = []
    lock = threading.Lock()

    def caller() -> None:
        for _ in range(50):
            got = budget.reserve("m", 100, None)
            if isinstance(got, str):
                assert "token cap is reached" in got
                return
            with lock:
                granted.append(got)
            budget.settle(got, 100, None)

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == 100  # exactly the cap's worth, no more
    assert budget.spend().tokens == 10_000
    assert budget.spend().exhausted == "tokens"
    budget.set_caps(max_tokens=20_000, max_cost_usd=None)  # raising the cap lets calls start again
    assert isinstance(budget.reserve("m", 100, None), Reservation)


def test_a_model_out_of_credit_is_refused_at_once_for_the_rest_of_the_run(settings: Settings) -> None:
    budget = RunBudget(redis.Redis.from_url(settings.broker_url or ""), "r", capped=False)
    budget.mark_out_of_credit("openai/m", "insufficient_quota")
    assert "out of credit" in str(budget.reserve("openai/m", 10, None))
    assert isinstance(budget.reserve("openai/other", 10, None), Reservation)


def test_a_worker_reads_an_absent_credit_mark_once_a_second_and_a_present_one_on_every_call(
    settings: Settings,
) -> None:
    client = redis.Redis.from_url(settings.broker_url or "")

    def reads() -> int:
        return int(client.info("commandstats").get("cmdstat_hget", {}).get("calls", 0))

    here = RunBudget(client, "r", capped=False)
    elsewhere = RunBudget(client, "r", capped=False)  # another worker of the same run
    before = reads()
    for _ in range(20):
        assert isinstance(here.reserve("openai/m", 10, None), Reservation)
    assert reads() - before == 1  # twenty calls, one read of the mark
    elsewhere.mark_out_of_credit("openai/m", "insufficient_quota")
    # Within the second the absence is trusted: such a call reaches the provider, which says
    # out of credit again, and ends budget-exhausted as a refusal would.
    time.sleep(CREDIT_RECHECK_S + 0.05)
    before = reads()
    for _ in range(3):
        assert "out of credit" in str(here.reserve("openai/m", 10, None))
    assert reads() - before == 3  # a mark that stands is read on every call
    here.set_caps(max_tokens=None, max_cost_usd=None)  # a resubmit clears it: calls start again at once
    assert isinstance(here.reserve("openai/m", 10, None), Reservation)


def test_the_worker_that_marks_a_model_out_of_credit_refuses_its_next_call_at_once(settings: Settings) -> None:
    budget = RunBudget(redis.Redis.from_url(settings.broker_url or ""), "r", capped=False)
    assert isinstance(budget.reserve("openai/m", 10, None), Reservation)  # absence now trusted
    budget.mark_out_of_credit("openai/m", "insufficient_quota")
    assert "out of credit" in str(budget.reserve("openai/m", 10, None))


def _manifest(repo: Path, settings: Settings, api_base: str, max_tokens: int) -> RunManifest:
    budget = AgentBudget(max_turns=4, wall_clock_s=60, command_timeout_s=30)
    return plan_manifest(repo, settings, api_base, budget=budget, max_tokens=max_tokens)


@pytest.mark.slow
def test_a_run_cut_off_by_its_token_cap_ends_budget_exhausted_and_resubmit_finishes_it(
    tmp_path: Path, settings: Settings
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=6)
    client = redis.Redis.from_url(settings.broker_url or "")
    state = RunState(client)
    store = open_store(settings.store)
    with OfflineModelServer(scenario()) as model:
        cap = 9_000  # a few shards' worth: each call reserves its prompt plus a 1,024-token answer
        manifest = _manifest(repo, settings, model.base_url, cap)
        run_id = manifest.plan.run_id
        budget = RunBudget(client, run_id)
        budget.set_caps(max_tokens=cap, max_cost_usd=None)
        publisher = task_sender(settings, manifest)
        submit(manifest, store, state, lambda r, s: publisher.send(QUEUE_EXECUTE, r, s), publisher.batch)
        node = WorkerNode(settings, "w", tmp_path / "w.log", concurrency=1)
        try:
            wait_until(lambda: state.reduced(run_id), 120, what="capped run reduced")
            states = state.states(run_id)
            graded = sorted(s for s, st in states.items() if st is ShardState.GRADED)
            cut = sorted(s for s, st in states.items() if st is ShardState.BUDGET_EXHAUSTED)
            assert graded and cut and len(graded) + len(cut) == 6, states
            assert budget.spend().tokens <= cap  # one worker: nothing in flight beyond the reservation
            calls_at_cap = model.stats()["total"]
            before = {s: store.get(trajectory_key(run_id, s)) for s in graded}

            done = resubmit_run(run_id, settings, max_tokens=10_000_000)
            assert sorted(done.execute + done.grade) == cut and done.notes == []
            wait_until(lambda: state.reduced(run_id), 120, what="resubmitted run reduced")
        finally:
            node.stop()
    assert set(state.states(run_id).values()) == {ShardState.GRADED}
    assert {s: store.get(trajectory_key(run_id, s)) for s in graded} == before  # graded shards never re-run
    assert model.stats()["total"] > calls_at_cap
    for shard in cut:  # the cut-off attempt's record is kept beside the new one
        first = ShardOutcomeRecord.model_validate_json(store.get(f"runs/{run_id}/attempts/0/outcomes/{shard}.json"))
        again = ShardOutcomeRecord.model_validate_json(store.get(f"runs/{run_id}/attempts/1/outcomes/{shard}.json"))
        assert (first.state, again.state) == (ShardState.BUDGET_EXHAUSTED, ShardState.GRADED)


@pytest.mark.slow
def test_regrade_with_another_judge_grades_again_without_executing_and_keeps_the_first_grades(
    tmp_path: Path, settings: Settings
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=2)
    client = redis.Redis.from_url(settings.broker_url or "")
    state = RunState(client)
    store = open_store(settings.store)
    with OfflineModelServer(scenario()) as model:
        manifest = _manifest(repo, settings, model.base_url, 10_000_000)
        manifest = manifest.model_copy(update={"settings": manifest.settings.model_copy(update={"calibrate": True})})
        run_id = manifest.plan.run_id
        publisher = task_sender(settings, manifest)
        submit(manifest, store, state, lambda r, s: publisher.send(QUEUE_EXECUTE, r, s), publisher.batch)
        node = WorkerNode(settings, "w", tmp_path / "w.log", concurrency=1)
        try:
            wait_until(lambda: state.reduced(run_id), 120, what="run reduced")
            shards = sorted(state.states(run_id))
            trajectories = {s: store.get(trajectory_key(run_id, s)) for s in shards}
            done = resubmit_run(run_id, settings, regrade=True, judges=["openai/scripted-second-judge"])
            assert sorted(done.grade) == shards and done.execute == []
            wait_until(lambda: state.reduced(run_id), 120, what="regraded run reduced")
        finally:
            node.stop()
    assert set(state.states(run_id).values()) == {ShardState.GRADED}
    assert {s: store.get(trajectory_key(run_id, s)) for s in shards} == trajectories  # nothing executed again
    for shard in shards:  # who graded what: the first attempt's grade is kept, the new one names the new judge
        first = ShardGrade.model_validate_json(store.get(f"runs/{run_id}/attempts/0/grades/{shard}.json"))
        second = ShardGrade.model_validate_json(store.get(f"runs/{run_id}/attempts/1/grades/{shard}.json"))
        now = ShardGrade.model_validate_json(store.get(f"runs/{run_id}/grades/{shard}.json"))
        assert [a.judge for a in first.judges] == [JUDGE]
        assert [a.judge for a in second.judges] == [a.judge for a in now.judges] == ["openai/scripted-second-judge"]
    # The report names the judges that graded, and their calibration (the regrade calibrated the new one).
    result = rereport(run_id, settings, tmp_path / "reports", Console(file=io.StringIO()))
    assert result.judges == ["openai/scripted-second-judge"], result.judges
    assert list(result.calibration) == ["openai/scripted-second-judge"]
    assert result.calibration["openai/scripted-second-judge"].startswith(("ok", "failed")), result.calibration
    (md,) = (tmp_path / "reports").glob("*.md")
    assert JUDGE not in md.read_text() and "judge openai/scripted-second-judge calibration:" in md.read_text()
    first_manifest = RunManifest.model_validate_json(store.get(f"runs/{run_id}/manifest.r1.json"))
    assert first_manifest.plan.judges == (JUDGE,)  # the submitted manifest stays readable


def test_resubmit_of_a_grade_only_run_never_executes_a_shard_that_had_no_recording(
    tmp_path: Path, settings: Settings
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=2)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    store = open_store(settings.store)
    manifest = _manifest(repo, settings, "http://127.0.0.1:9/v1", 1000)
    manifest = manifest.model_copy(
        update={"settings": manifest.settings.model_copy(update={"executor": "recorded:/somewhere"})}
    )
    run_id = manifest.plan.run_id
    store.put(manifest_key(run_id), manifest.model_dump_json().encode())
    ids = [s.shard_id for s in manifest.plan.shards]
    state.register(run_id, ids, manifest_key(run_id), "now", ShardState.EXECUTED)
    state.transition(run_id, ids[0], ShardState.EXECUTOR_FAILED)
    done = resubmit_run(run_id, settings, only=["executor-failed"])
    assert done.total == 0
    assert done.notes == [f"{ids[0]}: executor-failed in a grade-only run (no recording): left as it is"]
    assert state.get(run_id, ids[0]) is ShardState.EXECUTOR_FAILED


def test_resubmit_refuses_an_unknown_state_and_a_judge_without_regrade(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="--only: unknown state 'graded'"):
        parse_only("executor-failed,graded")
    with pytest.raises(ConfigError, match="--judge on resubmit needs --regrade"):
        resubmit_run("r", settings, judges=["openai/j"])


def test_resubmit_refuses_a_cost_cap_on_a_model_litellm_cannot_price(tmp_path: Path, settings: Settings) -> None:
    """The run's scripted models have no price: a raised cost cap would count none of their calls."""
    repo = make_corpus_repo(tmp_path / "repo", cases=2)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    store = open_store(settings.store)
    manifest = _manifest(repo, settings, "http://127.0.0.1:9/v1", 1000)
    run_id = manifest.plan.run_id
    store.put(manifest_key(run_id), manifest.model_dump_json().encode())
    ids = [s.shard_id for s in manifest.plan.shards]
    state.register(run_id, ids, manifest_key(run_id), "now", ShardState.BUDGET_EXHAUSTED)
    unpriced = ", ".join(dict.fromkeys([*manifest.plan.models, *manifest.plan.judges]))
    with pytest.raises(ConfigError, match=f"--max-cost 5: litellm has no price for models? {unpriced}, so"):
        resubmit_run(run_id, settings, max_cost_usd=5.0)
    assert set(state.states(run_id).values()) == {ShardState.BUDGET_EXHAUSTED}  # nothing re-queued
