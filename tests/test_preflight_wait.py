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

from engine.records import load_run_end
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from producer.corpus.repo import Repo
from producer.launch.preflight import (
    SendsPreflight,
    Waiting,
    check_before_dispatch,
    send_model_checks,
    wait_model_checks,
)
from producer.plan.planning import plan_run
from schemas.errors import ModelUnavailable, NoSandbox, NoTranscriptCapture
from schemas.manifest import AgentBudget, RunManifest, RunSettings
from schemas.preflight import HOST_CHECK, HostCheckReport, ModelCheck, PreflightReport
from schemas.status import SandboxMode
from tests.conftest import EXAMPLE_REPO
from tests.engine_support import EXECUTOR, JUDGE, make_corpus_repo, plan_manifest


def check_models(
    manifest: RunManifest,
    state: RunState,
    fleet: SendsPreflight,
    *,
    timeout_s: float,
    recheck_s: float,
    waiting: Waiting | None = None,
) -> list[PreflightReport]:
    """The model checks as the producer runs them: one preflight per queue sent, then the wait."""
    send_model_checks(manifest, fleet)
    return wait_model_checks(manifest, state, timeout_s=timeout_s, recheck_s=recheck_s, waiting=waiting)


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
    assert "no worker answered the model preflight on queues execute and grade within 0.5 s" in str(raised.value)
    assert "--no-preflight" in str(raised.value)


def test_only_the_silent_queue_is_named_when_the_other_answered(manifest: RunManifest, state: RunState) -> None:
    class HalfFleet(AnsweringFleet):
        def preflight(self, run_id: str, queue: str) -> None:
            if queue == "execute":
                super().preflight(run_id, queue)

    fleet = HalfFleet(state, after_s=0.0)
    with pytest.raises(ModelUnavailable) as raised:
        check_models(manifest, state, fleet, timeout_s=1.0, recheck_s=0.2)
    assert "no worker answered the model preflight on queue grade within" in str(raised.value)
    assert "execute" not in str(raised.value)


class CheckingFleet(AnsweringFleet):
    """An answering fleet whose execute worker also answers the host check, with ``host_status`` when set."""

    def __init__(self, state: RunState, after_s: float, host_status: str = "") -> None:
        super().__init__(state, after_s)
        self.host_status = host_status

    def host_check(self, run_id: str) -> None:
        self.sent.append(HOST_CHECK)
        detail = "found on the worker" if self.host_status else ""
        report = HostCheckReport(worker="test:1", status=self.host_status, detail=detail)
        threading.Thread(target=self._answer, args=(run_id, HOST_CHECK, report.model_dump_json()), daemon=True).start()


def with_shards(executor: str = "agent", run_id: str = "20260101-000000-0000cafe") -> RunManifest:
    """A run of the example repo's corpus planned for bubblewrap: shards to send, so a host to check."""
    bundle = Repo(EXAMPLE_REPO).load("evals/commit-message.evals.json")
    plan = plan_run(run_id, [bundle], [EXECUTOR], judges=[JUDGE], sandbox=SandboxMode.BWRAP)
    return RunManifest(plan=plan, snapshots={"current": "s.tar"}, settings=RunSettings(executor=executor))


def test_a_canary_is_answered_before_any_model_is_checked(state: RunState, settings: Settings) -> None:
    cmd = with_shards("cmd:agent")
    fleet = CheckingFleet(state, after_s=0.2, host_status=NoTranscriptCapture.status)
    store = open_store(settings.store)
    with pytest.raises(NoTranscriptCapture, match="found on the worker"):
        check_before_dispatch(cmd, store, state, fleet, models=True, embedded=True, timeout_s=30)
    assert fleet.sent == [HOST_CHECK]  # the failing canary stopped the run before any model call
    # The manifest the checking worker read stays; beside it, the run's end says it was refused and why.
    end = load_run_end(store, cmd.plan.run_id)
    assert end is not None and end.how == "blocked" and end.reason.startswith(f"{NoTranscriptCapture.status}: ")


def test_an_embedded_run_checks_its_sandbox_beside_the_models_and_says_its_failure_first(
    state: RunState, settings: Settings
) -> None:
    fleet = CheckingFleet(state, after_s=0.2, host_status=NoSandbox.status)
    store = open_store(settings.store)
    with pytest.raises(NoSandbox):
        check_before_dispatch(with_shards(), store, state, fleet, models=True, embedded=True, timeout_s=30)
    assert fleet.sent[0] == HOST_CHECK and set(fleet.sent[1:]) == {"execute", "grade"}
    passing = CheckingFleet(state, after_s=0.05)
    run = with_shards(run_id="20260101-000000-0000beef")
    assert check_before_dispatch(run, store, state, passing, models=False, embedded=True, timeout_s=30) is not None
    assert passing.sent == [HOST_CHECK]  # --no-preflight: the host is still checked, no model is
    assert check_before_dispatch(run, store, state, passing, models=False, embedded=False, timeout_s=30) is None


def test_a_long_wait_for_workers_says_so_once_on_the_way(manifest: RunManifest, state: RunState) -> None:
    class Silent:
        def preflight(self, run_id: str, queue: str) -> None:
            pass

    said: list[str] = []
    with pytest.raises(ModelUnavailable):
        check_models(manifest, state, Silent(), timeout_s=0.6, recheck_s=0.1, waiting=Waiting(said.append, 0.2))
    assert said == ["waiting for a worker on queues execute and grade (up to 0.6 s)..."]
