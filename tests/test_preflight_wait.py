"""The producer's wait for the preflight reports, against a real redis-server.

The workers' side (the checks themselves, through the real command) is in
tests/test_preflight.py; here the waiting: it ends when the last report is stored (woken by
the run's preflight signal, not a poll), a report's faults are named, and a queue no worker
answers blocks the run naming that queue.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis

from engine.settings import Settings
from engine.state import RunState
from producer.launch.preflight import check_models
from schemas.errors import ModelUnavailable
from schemas.manifest import AgentBudget, RunManifest
from schemas.preflight import ModelCheck, PreflightReport
from tests.engine_support import EXECUTOR, JUDGE, make_corpus_repo, plan_manifest


@pytest.fixture
def manifest(tmp_path: Path, settings: Settings) -> RunManifest:
    budget = AgentBudget(max_turns=2, wall_clock_s=60, command_timeout_s=30)
    return plan_manifest(make_corpus_repo(tmp_path / "repo", cases=1), settings, "http://127.0.0.1:9/v1", budget=budget)


@pytest.fixture
def state(settings: Settings) -> RunState:
    return RunState(redis.Redis.from_url(settings.broker_url or ""))


class AnsweringFleet:
    """A publisher whose 'worker' stores each queue's report ``after_s`` later, from another thread."""

    def __init__(self, state: RunState, after_s: float, broken: dict[str, str] | None = None) -> None:
        self.state, self.after_s, self.broken = state, after_s, broken or {}
        self.sent: list[str] = []

    def preflight(self, run_id: str, queue: str) -> None:
        self.sent.append(queue)
        model = EXECUTOR if queue == "execute" else JUDGE
        why = self.broken.get(model, "")
        report = PreflightReport(queue=queue, worker="test:1", checks=[ModelCheck(model=model, ok=not why, why=why)])
        threading.Thread(target=self._answer, args=(run_id, queue, report.model_dump_json()), daemon=True).start()

    def _answer(self, run_id: str, queue: str, report: str) -> None:
        time.sleep(self.after_s)
        self.state.put_preflight(run_id, queue, report)


def test_the_wait_ends_when_the_last_report_is_stored_not_at_the_next_look(
    manifest: RunManifest, state: RunState
) -> None:
    fleet = AnsweringFleet(state, after_s=0.3)
    started = time.monotonic()
    reports = check_models(manifest, state, fleet, timeout_s=120, recheck_s=4)  # below the client's 5 s socket timeout
    waited = time.monotonic() - started
    assert sorted(fleet.sent) == ["execute", "grade"]
    assert sorted(r.queue for r in reports) == ["execute", "grade"]
    assert all(c.ok for r in reports for c in r.checks)
    assert waited < 2.5  # the reports were stored at 0.3 s; the next look would have been at 4 s


def test_a_report_naming_a_fault_blocks_the_run_with_the_model_and_why(manifest: RunManifest, state: RunState) -> None:
    fleet = AnsweringFleet(state, after_s=0.0, broken={JUDGE: "environment variable JUDGE_KEY is not set"})
    with pytest.raises(ModelUnavailable) as raised:
        check_models(manifest, state, fleet, timeout_s=120, recheck_s=4)
    assert f"{JUDGE}: environment variable JUDGE_KEY is not set" in str(raised.value)
    assert EXECUTOR not in str(raised.value)


def test_a_queue_no_worker_answers_blocks_the_run_naming_the_queue(manifest: RunManifest, state: RunState) -> None:
    class Silent:
        def __init__(self) -> None:
            self.sent: list[str] = []

        def preflight(self, run_id: str, queue: str) -> None:
            self.sent.append(queue)

    fleet = Silent()
    with pytest.raises(ModelUnavailable) as raised:
        check_models(manifest, state, fleet, timeout_s=0.5, recheck_s=0.2)
    assert fleet.sent == ["execute", "grade"]
    assert "no worker on queue execute, grade answered the model preflight within 0.5 s" in str(raised.value)
    assert "--no-preflight" in str(raised.value)


def test_only_the_silent_queue_is_named_when_the_other_answered(manifest: RunManifest, state: RunState) -> None:
    class HalfFleet(AnsweringFleet):
        def preflight(self, run_id: str, queue: str) -> None:
            if queue == "execute":
                super().preflight(run_id, queue)

    fleet = HalfFleet(state, after_s=0.0)
    with pytest.raises(ModelUnavailable) as raised:
        check_models(manifest, state, fleet, timeout_s=1.0, recheck_s=0.2)
    assert "no worker on queue grade answered" in str(raised.value)
    assert "execute" not in str(raised.value)
