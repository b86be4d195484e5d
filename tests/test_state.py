"""Shard state in a real Redis: forward-only transitions, claims, leases, the finish counter."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

import engine
from engine.broker import InProcessBroker, Message
from engine.keys import claims_field, run_keys
from engine.records import load_outcome
from engine.redis_server import RedisServer
from engine.scripts import ScriptNotFound, scripts, source
from engine.settings import Settings
from engine.state import MAX_CLAIMS, RunState
from schemas.constants import QUEUE_REDUCE
from schemas.manifest import outcome_key
from schemas.outcome import ShardOutcomeRecord
from schemas.status import INFRA_FAILURES, TERMINAL_STATES, ShardState
from worker import pipeline
from worker.context import Context
from worker.lifecycle import ShardLease

RUN = "20260101-000000-0000abcd"
S = ShardState


def _state(client: redis.Redis, shards: list[str] | None = None) -> RunState:
    state = RunState(client)
    state.register(RUN, shards or ["s1"], "runs/x/manifest.json", "2026-01-01T00:00:00")
    return state


def _race(n: int, fn: Callable[[int], object]) -> list[object]:
    """Run ``fn(i)`` in ``n`` threads released together; their results in thread order."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def body(i: int) -> None:
        barrier.wait()
        results[i] = fn(i)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_a_shard_moves_only_forward_through_the_happy_path(redis_client: redis.Redis) -> None:
    state = _state(redis_client)
    assert state.transition(RUN, "s1", S.EXECUTING).moved
    assert not state.transition(RUN, "s1", S.QUEUED).moved
    assert state.transition(RUN, "s1", S.EXECUTED).moved
    assert not state.transition(RUN, "s1", S.EXECUTING).moved
    assert not state.transition(RUN, "s1", S.EXECUTED).moved  # not even to where it is
    assert state.transition(RUN, "s1", S.GRADING).moved
    assert state.get(RUN, "s1") is S.GRADING


@pytest.mark.parametrize("end", sorted(TERMINAL_STATES, key=lambda s: s.value))
def test_a_terminal_shard_never_moves_again(redis_client: redis.Redis, end: ShardState) -> None:
    state = _state(redis_client, ["s1", "s2"])
    assert state.transition(RUN, "s1", end).moved
    for target in ShardState:
        result = state.transition(RUN, "s1", target)
        assert not result.moved and result.previous is end
    assert not state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "t", 30)
    assert state.get(RUN, "s1") is end
    assert state.totals(RUN) == (1, 2)  # counted once


def test_an_unknown_shard_is_never_created_by_a_transition(redis_client: redis.Redis) -> None:
    state = _state(redis_client)
    assert not state.transition(RUN, "ghost", S.GRADED).moved
    assert state.get(RUN, "ghost") is None


def test_of_concurrent_claimers_exactly_one_wins(redis_client: redis.Redis) -> None:
    state = _state(redis_client)
    wins = _race(16, lambda i: state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, f"token{i}", 30))
    assert sum(w is not None for w in wins) == 1
    assert state.get(RUN, "s1") is S.EXECUTING


def test_the_last_terminal_transition_reports_finished_run_to_exactly_one_caller(redis_client: redis.Redis) -> None:
    shards = [f"s{i}" for i in range(40)]
    state = _state(redis_client, shards)
    # Every shard is finished by two racing callers (a redelivered task), all at once.
    results = _race(80, lambda i: state.transition(RUN, shards[i // 2], S.GRADED))
    assert sum(r.moved for r in results) == 40  # type: ignore[attr-defined]
    assert sum(r.finished_run for r in results) == 1  # type: ignore[attr-defined]
    assert state.totals(RUN) == (40, 40)


def test_a_transition_with_a_token_needs_the_lease(redis_client: redis.Redis) -> None:
    state = _state(redis_client)
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "mine", 30)
    assert not state.transition(RUN, "s1", S.EXECUTED, "someone-else").moved
    assert state.transition(RUN, "s1", S.EXECUTED, "mine").moved


def test_a_heartbeat_keeps_the_lease_and_an_expired_one_is_reaped_back_to_queued(redis_client: redis.Redis) -> None:
    state = _state(redis_client)
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "old", 0.3)
    for _ in range(5):  # 0.5 s in all, longer than the 0.3 s lease
        time.sleep(0.1)
        assert state.heartbeat(RUN, "s1", "old", 0.3)
        assert state.reap(RUN) == []
    time.sleep(0.4)  # the worker "died": no more heartbeats
    assert state.reap(RUN) == [("s1", S.QUEUED)]
    assert state.get(RUN, "s1") is S.QUEUED
    assert state.reap(RUN) == []  # reaped once
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "new", 30)
    assert not state.heartbeat(RUN, "s1", "old", 30)  # the dead worker's token is worthless now
    assert not state.transition(RUN, "s1", S.EXECUTED, "old").moved


def test_an_expired_grading_lease_goes_back_to_executed(redis_client: redis.Redis) -> None:
    state = _state(redis_client)
    assert state.transition(RUN, "s1", S.EXECUTED).moved
    assert state.claim(RUN, "s1", S.EXECUTED, S.GRADING, "g", 0.1)
    time.sleep(0.2)
    assert state.reap(RUN) == [("s1", S.EXECUTED)]
    assert state.claim(RUN, "s1", S.EXECUTED, S.GRADING, "g2", 30)


def test_a_live_lease_cannot_be_taken_over_but_an_expired_one_can(redis_client: redis.Redis) -> None:
    state = _state(redis_client)
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "first", 0.2)
    assert not state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "second", 30)  # redelivered message
    time.sleep(0.3)
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "second", 30)  # before any reaper pass
    assert not state.heartbeat(RUN, "s1", "first", 30)


def test_requeue_puts_chosen_terminal_shards_back_and_the_run_finishes_again(redis_client: redis.Redis) -> None:
    infra = sorted(INFRA_FAILURES, key=lambda s: s.value)
    shards = ["ok", "blocked"] + [f"bad{i}" for i in range(len(infra))]
    state = _state(redis_client, shards)
    state.transition(RUN, "ok", S.GRADED)
    state.transition(RUN, "blocked", S.BLOCKED)
    finished = [state.transition(RUN, f"bad{i}", s).finished_run for i, s in enumerate(infra)]
    assert finished[-1]
    state.mark_reduced(RUN)
    assert state.reduced(RUN) and RUN not in state.active_runs()

    # An executor failure runs again; a grader failure grades the stored trajectory again.
    expected = {f"bad{i}": S.QUEUED if s is S.EXECUTOR_FAILED else S.EXECUTED for i, s in enumerate(infra)}
    moves = [(f"bad{i}", s, expected[f"bad{i}"]) for i, s in enumerate(infra)]
    stale_view = [("ok", S.EXECUTOR_FAILED, S.QUEUED)]  # the caller's view is out of date: left alone
    again = sorted(state.requeue(RUN, moves + stale_view))
    assert again == sorted(f"bad{i}" for i in range(len(infra)))
    assert state.get(RUN, "ok") is S.GRADED and state.get(RUN, "blocked") is S.BLOCKED
    assert all(state.get(RUN, s) is expected[s] for s in again)
    assert not state.reduced(RUN) and RUN in state.active_runs()
    assert state.totals(RUN) == (2, len(shards))
    results = [state.transition(RUN, s, S.GRADED) for s in sorted(again)]
    assert [r.finished_run for r in results] == [False] * (len(again) - 1) + [True]


def test_register_is_idempotent_and_keeps_states(redis_client: redis.Redis) -> None:
    state = _state(redis_client, ["a", "b"])
    state.transition(RUN, "a", S.GRADED)
    assert state.register(RUN, ["a", "b"], "runs/x/manifest.json", "2026-01-01T00:00:00") == 0
    assert state.get(RUN, "a") is S.GRADED and state.get(RUN, "b") is S.QUEUED
    assert state.totals(RUN) == (1, 2)
    assert state.counts(RUN)[S.GRADED.value] == 1


def test_unleased_lists_waiting_shards_nobody_holds(redis_client: redis.Redis) -> None:
    state = _state(redis_client, ["q", "held", "x", "done"])
    state.claim(RUN, "held", S.QUEUED, S.EXECUTING, "t", 30)
    state.transition(RUN, "x", S.EXECUTED)
    state.transition(RUN, "done", S.GRADED)
    assert state.unleased(RUN) == [("q", S.QUEUED), ("x", S.EXECUTED)]


def test_a_worker_that_lost_its_lease_writes_no_outcome_and_moves_nothing(
    redis_client: redis.Redis, redis_server: RedisServer, tmp_path: Path
) -> None:
    state = _state(redis_client)
    ctx = _ctx(redis_server, tmp_path)
    broker = InProcessBroker()
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "stalled", 0.1)
    time.sleep(0.2)
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "new-owner", 30)  # the lease was taken over

    def lease(token: str) -> ShardLease:
        return ShardLease(ctx, broker, RUN, "s1", S.EXECUTING, token)

    lease("stalled").end(ShardOutcomeRecord(state=S.EXECUTOR_FAILED, detail="late crash"))
    assert not ctx.store.exists(outcome_key(RUN, "s1"))
    assert state.get(RUN, "s1") is S.EXECUTING and broker.messages == []

    lease("new-owner").end(ShardOutcomeRecord(state=S.GRADED))
    assert load_outcome(ctx.store, RUN, "s1") == ShardOutcomeRecord(state=S.GRADED)
    assert state.get(RUN, "s1") is S.GRADED and broker.messages == [Message(QUEUE_REDUCE, RUN, None)]


def _ctx(redis_server: RedisServer, tmp_path: Path) -> Context:
    return Context(Settings(broker_url=redis_server.url, store=str(tmp_path / "store"), workdir=tmp_path / "w"))


def test_every_claim_counts_an_attempt_and_requeue_resets_them(redis_client: redis.Redis) -> None:
    state = _state(redis_client)
    for i in range(3):  # the worker dies each time; its lease runs out and the shard is reaped
        assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, f"t{i}", 0.05)
        time.sleep(0.1)
        assert state.reap(RUN) == [("s1", S.QUEUED)]
    assert state.claims(RUN, "s1", S.EXECUTING) == 3
    assert state.claims(RUN, "s1", S.GRADING) == 0
    state.transition(RUN, "s1", S.EXECUTOR_FAILED)
    assert state.requeue(RUN, [("s1", S.EXECUTOR_FAILED, S.QUEUED)]) == ["s1"]
    assert state.claims(RUN, "s1", S.EXECUTING) == 0


@pytest.mark.parametrize(
    ("leased", "start", "end"),
    [(S.EXECUTING, S.QUEUED, S.EXECUTOR_FAILED), (S.GRADING, S.EXECUTED, S.GRADER_DISPATCH_FAILED)],
)
def test_a_shard_whose_worker_died_max_attempts_times_is_given_up_as_an_infra_failure(
    redis_client: redis.Redis,
    redis_server: RedisServer,
    tmp_path: Path,
    leased: ShardState,
    start: ShardState,
    end: ShardState,
) -> None:
    state = _state(redis_client)
    if start is S.EXECUTED:
        state.transition(RUN, "s1", S.EXECUTED)
    redis_client.hset(run_keys(RUN).claims, claims_field("s1", leased.value), MAX_CLAIMS)
    ctx = _ctx(redis_server, tmp_path)
    broker = InProcessBroker()
    task = pipeline.execute_shard if leased is S.EXECUTING else pipeline.grade_shard
    task(ctx, broker, RUN, "s1")  # no manifest exists: nothing past the give-up may run
    assert state.get(RUN, "s1") is end
    outcome = load_outcome(ctx.store, RUN, "s1")
    assert outcome is not None and "claimed 3 times while" in outcome.detail and "never ended" in outcome.detail
    assert broker.messages == [Message(QUEUE_REDUCE, RUN, None)]


def test_an_abandoned_lease_refuses_its_holder_and_is_reaped_at_once(redis_client: redis.Redis) -> None:
    state = _state(redis_client)
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "stuck", 30)
    assert not state.expire_lease(RUN, "s1", "someone-else")  # only the holder's token gives it up
    assert state.heartbeat(RUN, "s1", "stuck", 30)
    assert state.expire_lease(RUN, "s1", "stuck")
    assert not state.heartbeat(RUN, "s1", "stuck", 30)  # the stuck thread can neither renew ...
    assert not state.transition(RUN, "s1", S.EXECUTED, "stuck").moved  # ... nor write
    assert state.reap(RUN) == [("s1", S.QUEUED)]  # long before its 30 s lease would have lapsed
    assert state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "next", 30)
    assert not state.expire_lease(RUN, "s1", "stuck")  # a late hard deadline cannot hit the new owner
    assert state.heartbeat(RUN, "s1", "next", 30)


def test_a_waiting_client_wakes_when_the_run_is_reduced_not_a_poll_later(redis_client: redis.Redis) -> None:
    state = _state(redis_client)
    assert not state.wait_reduced(RUN, 0.05)  # nothing reduced: the wait times out, the answer is no

    woke: list[float] = []
    waiter = threading.Thread(target=lambda: woke.append(time.monotonic()) if state.wait_reduced(RUN, 30) else None)
    waiter.start()
    time.sleep(0.2)
    marked = time.monotonic()
    state.mark_reduced(RUN)
    waiter.join(10)

    assert woke and woke[0] - marked < 1.0  # the token woke it; a 30 s timeout did not end the wait
    # A run reduced again (after a resubmit) holds one token, not one per reduction.
    state.mark_reduced(RUN)
    state.mark_reduced(RUN)
    assert redis_client.llen(run_keys(RUN).reduced_signal) == 1


def test_a_claim_brings_back_its_claim_count_and_the_shard_s_resubmit_number(redis_client: redis.Redis) -> None:
    state = _state(redis_client)
    first = state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "old", 0.05)
    assert first is not None and (first.claims, first.attempt) == (1, 0)
    time.sleep(0.1)  # the lease lapses: the next claim takes it over and counts again
    second = state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "new", 30)
    assert second is not None and (second.claims, second.attempt) == (2, 0)
    assert second.claims == state.claims(RUN, "s1", S.EXECUTING)

    state.next_attempt(RUN, "s1")
    state.next_attempt(RUN, "s1")
    graded = state.claim(RUN, "s1", S.EXECUTING, S.GRADING, "g", 30)
    assert graded is not None and (graded.claims, graded.attempt) == (1, 2)


def test_a_claim_brings_back_the_runs_current_manifest_key(redis_client: redis.Redis) -> None:
    state = _state(redis_client, ["s1", "s2"])
    first = state.claim(RUN, "s1", S.QUEUED, S.EXECUTING, "t1", 30)
    assert first is not None and first.manifest_key == "runs/x/manifest.json"
    state.set_manifest_key(RUN, "runs/x/manifest-2.json")  # a resubmit with other judges
    second = state.claim(RUN, "s2", S.QUEUED, S.EXECUTING, "t2", 30)
    assert second is not None and second.manifest_key == "runs/x/manifest-2.json"


def test_every_script_is_read_with_the_state_names_filled_in_from_the_enum() -> None:
    for script in sorted((Path(engine.__file__).parent / "lua").glob("*.lua")):
        assert "${" not in source(script.stem), script.name
    transition = source("state_transition")
    assert f"if cur == '{S.EXECUTING.value}'" in transition and f'["{S.BUDGET_EXHAUSTED.value}"]=true' in transition
    with pytest.raises(ScriptNotFound, match="no Redis script 'state_teleport'"):
        source("state_teleport")


def test_an_owner_loads_every_script_of_its_prefix_by_the_rest_of_its_name(redis_client: redis.Redis) -> None:
    lua = Path(engine.__file__).parent / "lua"
    state = scripts(redis_client, "state")
    assert sorted(state) == sorted(p.stem.removeprefix("state_") for p in lua.glob("state_*.lua"))
    assert state["claim"].script == source("state_claim")
    assert "sample" in scripts(redis_client, "delivery") and "claim" not in scripts(redis_client, "delivery")
