"""One function gives every caller a run's result (reducer.from_store.run_result): the stored one, a
streamed reduce or one that keeps rows, chosen in one place. Pure: the run's records are in memory."""

from __future__ import annotations

from collections.abc import Collection, Iterator

import pytest

from reducer.from_store import run_result
from schemas.manifest import RunManifest, RunOutline
from schemas.outcome import CalibrationRecord, CalibrationStatus, OutcomeLine
from schemas.report import CarriedReport, RunResult
from schemas.shard_outcome import ShardOutcome, outcome_line_of
from schemas.status import ShardState, Verdict
from schemas.triggers import TriggerSettings
from tests.test_reducer import bundle, graded, plan_for


class Records:
    """A run's records held in memory, as :class:`reducer.from_store.RunRecords` reads them."""

    def __init__(self, manifest: RunManifest, outcomes: dict[str, ShardOutcome], stored: RunResult | None = None):
        self.full = manifest
        self.stored = stored
        self.by_shard = outcomes
        self.sealed = 0
        self.manifests_read = 0

    def stored_result(self) -> RunResult | None:
        return self.stored

    def outline(self) -> RunOutline | None:
        return RunOutline.of(self.full) if self.full.plan.shards else None

    def manifest(self) -> RunManifest:
        self.manifests_read += 1
        return self.full

    def calibration(self, manifest: RunManifest) -> dict[str, CalibrationRecord]:
        return {j: CalibrationRecord(judge=j, status=CalibrationStatus.OK) for j in manifest.plan.judges}

    def outcomes(self, manifest: RunManifest, skip: Collection[str] = frozenset()) -> dict[str, ShardOutcome]:
        return {k: v for k, v in self.by_shard.items() if k not in skip}

    def lines(self, unreadable: list[int]) -> Iterator[OutcomeLine]:
        # The first shard's line was lost with Redis: the reduce must read it from its records.
        return iter([outcome_line_of(o) for o in list(self.by_shard.values())[1:]])

    def ended(self) -> int:
        return len(self.by_shard)

    def seal(self) -> None:
        self.sealed += 1


def _run(stored: RunResult | None = None, triggers: TriggerSettings | None = None) -> Records:
    plan = plan_for([bundle("s", (2, 2, 2, 2))], models=["m"], epochs=2)
    manifest = RunManifest(plan=plan, snapshots={})
    if triggers is not None:
        manifest = manifest.model_copy(update={"settings": manifest.settings.model_copy(update={"triggers": triggers})})
    outcomes = {s.shard_id: graded(s, [True, s.epoch == 0]) for s in plan.shards}
    return Records(manifest, outcomes, stored)


def test_a_small_run_keeps_its_rows_and_a_large_one_streams_after_sealing_its_lines() -> None:
    small = _run()
    kept = run_result(small, stream_from=9)  # 8 shards
    assert not kept.streamed and small.sealed == 0
    assert len(kept.result.skills[0].runs) == 8 and kept.manifest.plan.shards
    large = _run()
    streamed = run_result(large, stream_from=8)
    assert streamed.streamed and large.sealed == 1
    assert (streamed.lines, streamed.shards, streamed.rebuilt) == (7, 8, 1)
    assert streamed.result.skills[0].runs == [] and streamed.manifest.plan.shards == ()
    # The same figures either way: 12 of 16 verdicts passed, every shard graded.
    for reduced in (kept, streamed):
        s = reduced.result.skills[0]
        assert (s.behavioural.passed, s.behavioural.total, s.not_graded) == (12, 16, 0)
        assert reduced.result.verdict is Verdict.FAIL  # below the default threshold 1.0


def test_the_stored_result_is_used_only_when_asked_for() -> None:
    stored = run_result(_run(), stream_from=100).result.model_copy(update={"reasons": ["stored"]})
    assert run_result(_run(stored), stream_from=100, reuse=True).result.reasons == ["stored"]
    assert run_result(_run(stored), stream_from=100).result.reasons != ["stored"]


def test_a_trigger_run_never_streams() -> None:
    records = _run(triggers=TriggerSettings())
    assert not run_result(records, stream_from=1).streamed


def test_a_plan_with_nothing_to_run_reduces_to_what_was_left_out() -> None:
    plan = plan_for([], models=["m"])  # every corpus already has a report
    earlier = CarriedReport(corpus_file="evals/s.evals.json", skill="s", verdict="FAIL", report="out/s.json")
    records = Records(RunManifest(plan=plan, snapshots={}, skipped=[], reported=[earlier]), {})
    reduced = run_result(records, stream_from=1, reuse=True)
    assert reduced.result.verdict is Verdict.FAIL  # the earlier report stands, and it failed
    assert reduced.result.reasons == ["s: FAIL in its earlier report out/s.json (--force re-runs it)"]


@pytest.mark.parametrize("state", [ShardState.EXECUTOR_FAILED, ShardState.BLOCKED])
def test_a_shard_rebuilt_from_its_records_counts_as_the_lines_do(state: ShardState) -> None:
    records = _run()
    first = next(iter(records.by_shard.values()))
    records.by_shard[first.shard.shard_id] = ShardOutcome(first.shard, state, detail=f"{state.value}: x")
    streamed = run_result(records, stream_from=1)
    kept = run_result(records, stream_from=100)
    assert streamed.rebuilt == 1
    for reduced in (streamed, kept):
        assert reduced.result.skills[0].not_graded == 1
        assert reduced.result.skills[0].blocked_total == (state is ShardState.BLOCKED)
