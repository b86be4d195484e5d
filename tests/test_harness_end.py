"""How a harness shard ends, read from the proxy's record alone (worker/executor/harness_end.py):
only the harness's own conversation failing upstream is infra; the rest is graded."""

from __future__ import annotations

import pytest

from harnesses.model_record import ModelTurn, ProxyRecord
from schemas.errors import BudgetExhausted, ExecutorFailed
from schemas.trajectory import EndReason
from worker.executor.harness_end import settle_end
from worker.sandbox import CommandResult

OK = CommandResult(output="done", exit_code=0)
CUT = CommandResult(output="AAAA [... elided ...] AAAA", exit_code=0, truncated=True)


def test_a_stream_the_agents_output_cut_is_graded_as_stream_cut() -> None:
    record = ProxyRecord(turns=[ModelTurn()], asked=1)
    assert settle_end("h", record, CUT, saw_result=False) is EndReason.STREAM_CUT


def test_a_harness_that_never_asked_its_model_is_graded_except_in_its_canary() -> None:
    assert settle_end("h", ProxyRecord(), OK, saw_result=False) is EndReason.NO_MODEL_CALL
    with pytest.raises(ExecutorFailed, match="before its first model response"):
        settle_end("h", ProxyRecord(), OK, saw_result=False, probe=True)


def test_only_the_harness_s_own_failed_requests_are_infra() -> None:
    # Its own conversation asked and never got an answer: the upstream, not the agent.
    asked = ProxyRecord(asked=2, upstream_failures=2, last_upstream_ok=False, last_error="status 529")
    with pytest.raises(ExecutorFailed, match="upstream kept failing"):
        settle_end("h", asked, OK, saw_result=False)
    # Side requests the upstream failed leave the record's own fields alone: graded.
    answered = ProxyRecord(turns=[ModelTurn()], asked=1)
    assert settle_end("h", answered, OK, saw_result=True) is None


def test_the_runs_cap_is_never_the_agents() -> None:
    record = ProxyRecord(turns=[ModelTurn()], asked=1, run_budget_end="the run's token cap is reached")
    with pytest.raises(BudgetExhausted):
        settle_end("h", record, OK, saw_result=True)


def test_an_upstream_failure_the_worker_s_own_call_does_not_see_is_graded() -> None:
    # A request copying the case prompt passes for the harness's own: its 429 alone proves nothing.
    asked = ProxyRecord(asked=3, upstream_failures=3, last_upstream_ok=False, last_error="status 429")
    answered = ProxyRecord(turns=[ModelTurn()], asked=2, upstream_failures=1, last_upstream_ok=False)
    calls: list[str] = []

    def worker_call_answered() -> None:
        calls.append("probe")

    for record in (asked, answered):
        ended = settle_end("h", record, OK, saw_result=False, upstream_check=worker_call_answered)
        assert ended is EndReason.UPSTREAM_FAILED_OWN_REQUESTS
    timed_out = CommandResult(output="", exit_code=-9, limit="timeout")
    assert settle_end("h", asked, timed_out, saw_result=False, upstream_check=worker_call_answered) is (
        EndReason.UPSTREAM_FAILED_OWN_REQUESTS
    )
    assert calls == ["probe"] * 3


def test_an_upstream_failure_the_worker_s_own_call_shares_is_infra() -> None:
    asked = ProxyRecord(asked=3, upstream_failures=3, last_upstream_ok=False, last_error="status 529")
    with pytest.raises(ExecutorFailed, match="the worker's own call failed too: status 529"):
        settle_end("h", asked, OK, saw_result=False, upstream_check=lambda: "status 529")


def test_the_worker_calls_the_upstream_only_when_the_record_would_make_the_shard_infra() -> None:
    def never() -> str | None:
        raise AssertionError("no call on this path")

    assert settle_end("h", ProxyRecord(turns=[ModelTurn()], asked=1), OK, saw_result=True, upstream_check=never) is None
    assert settle_end("h", ProxyRecord(), OK, saw_result=False, upstream_check=never) is EndReason.NO_MODEL_CALL
    # The canary, where nothing of a repo runs, is infra on its record alone.
    with pytest.raises(ExecutorFailed):
        settle_end(
            "h", ProxyRecord(asked=1, upstream_failures=1), OK, saw_result=False, probe=True, upstream_check=never
        )
