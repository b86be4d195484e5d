"""Read a run's stored records back as the reducer's inputs: :class:`StoredRun`.

Everything a report needs is in the artifact store (grades, outcomes, trajectories,
calibration, outcome segments), so a report can be rebuilt anywhere, even after the broker
is gone. This module only reads; :func:`reducer.from_store.run_result` decides how a run is
reduced from what it reads (shared ground never imports the reducer).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator

from engine.records import load_calibration, load_manifest, load_outcomes, load_outline, load_result
from engine.segments import read_segment, segment_keys_in_store
from engine.store import ArtifactStore
from schemas.call_lines import http_call_lines, mock_call_lines
from schemas.manifest import RunManifest, RunOutline, grade_key, trajectory_key
from schemas.outcome import CalibrationRecord, CalibrationStatus, OutcomeLine
from schemas.report import RunResult
from schemas.shard_outcome import ShardOutcome
from schemas.trajectory import Trajectory, Usage
from schemas.verdict import ShardGrade


def load_trajectory(store: ArtifactStore, run_id: str, shard_id: str) -> Trajectory | None:
    key = trajectory_key(run_id, shard_id)
    return Trajectory.model_validate_json(store.get(key)) if store.exists(key) else None


COLLECT_BATCH = 500
"""Shards whose records are read together (``get_many``: parallel reads on S3, one pass locally)."""


def collect_outcomes(
    store: ArtifactStore, manifest: RunManifest, skip: Collection[str] = frozenset()
) -> dict[str, ShardOutcome]:
    """Shard id -> outcome, for every shard that reached a terminal state (others, and ``skip``, are absent).

    Records are read ``COLLECT_BATCH`` shards at a time, each kind in one batched read, so
    a reduce on S3 costs parallel round trips instead of three sequential ones per shard.
    """
    run_id = manifest.plan.run_id
    out: dict[str, ShardOutcome] = {}
    shards = [s for s in manifest.plan.shards if s.shard_id not in skip] if skip else manifest.plan.shards
    for start in range(0, len(shards), COLLECT_BATCH):
        batch = shards[start : start + COLLECT_BATCH]
        records = load_outcomes(store, run_id, [s.shard_id for s in batch])
        ended = [s for s in batch if s.shard_id in records]
        grades = store.get_many([grade_key(run_id, s.shard_id) for s in ended])
        trajectories = store.get_many([trajectory_key(run_id, s.shard_id) for s in ended])
        for shard in ended:
            record = records[shard.shard_id]
            raw_grade = grades.get(grade_key(run_id, shard.shard_id))
            grade = ShardGrade.model_validate_json(raw_grade) if raw_grade is not None else None
            if grade is not None and grade.state is not record.state:
                grade = None  # left over from an earlier attempt of a re-run shard
            raw_trajectory = trajectories.get(trajectory_key(run_id, shard.shard_id))
            trajectory = Trajectory.model_validate_json(raw_trajectory) if raw_trajectory is not None else None
            out[shard.shard_id] = ShardOutcome(
                shard,
                record.state,
                grade=grade,
                detail=record.detail,
                stops_run=record.stops_run,
                sandbox=trajectory.sandbox if trajectory else None,
                end_reason=trajectory.end_reason.value if trajectory else "",
                usage=trajectory.usage if trajectory else Usage(),
                template_hashes=trajectory.template_hashes if trajectory else {},
                skill_activated=trajectory.skill_activated if trajectory else None,
                rejected_calls=tuple(trajectory.rejected_calls) if trajectory else (),
                mock_findings=tuple(trajectory.mock_findings) if trajectory else (),
                skills_fired=_fired(trajectory),
                proposed_calls=tuple(trajectory.proposed_calls) if trajectory else (),
                refused_requests=tuple(trajectory.refused_requests) if trajectory else (),
                mock_calls=tuple(mock_call_lines(trajectory)) if trajectory else (),
                http_calls=tuple(http_call_lines(trajectory)) if trajectory else (),
            )
    return out


def _fired(trajectory: Trajectory | None) -> tuple[str, ...] | None:
    return tuple(trajectory.skills_fired) if trajectory and trajectory.skills_fired is not None else None


def calibration_status(store: ArtifactStore, manifest: RunManifest) -> dict[str, CalibrationRecord]:
    """Judge -> its calibration record (skipped with --no-calibration, missing when none was stored)."""
    status = {}
    for judge in manifest.plan.judges:
        record = load_calibration(store, manifest.plan.run_id, judge) if manifest.settings.calibrate else None
        if record is None:
            missing = CalibrationStatus.MISSING if manifest.settings.calibrate else CalibrationStatus.SKIPPED
            record = CalibrationRecord(judge=judge, status=missing)
        status[judge] = record
    return status


SEGMENT_READ_BATCH = 4
"""Segment objects read together (about 6 MB): parallel requests on S3, bounded memory."""


def stream_outcome_lines(
    store: ArtifactStore, run_id: str, unreadable: list[int] | None = None
) -> Iterator[OutcomeLine]:
    """Every sealed outcome line of the run, newest first (a reader keeps the first line of each shard).

    Lines that do not parse are left out and counted in ``unreadable[0]`` when given.
    """
    keys = segment_keys_in_store(store, run_id)[::-1]
    for start in range(0, len(keys), SEGMENT_READ_BATCH):
        batch = keys[start : start + SEGMENT_READ_BATCH]
        raw = store.get_many(batch)
        for key in batch:
            if key in raw:
                lines, bad = read_segment(raw[key])
                if unreadable is not None:
                    unreadable[0] += bad
                yield from reversed(lines)


def ended_in_store(store: ArtifactStore, run_id: str) -> int:
    """How many shards have an outcome record (one listing: about a request per 1,000 shards on S3)."""
    return len(store.list(f"runs/{run_id}/outcomes/"))


class StoredRun:
    """One run's records in the store, read as :class:`reducer.from_store.RunRecords`.

    ``manifest``: the manifest when the caller holds it already (a run that never reached the
    store has only that); ``seal``: what writes the lines a reduce must not miss into the store
    (the segment writer's flush, when there is a broker); ``ended``: how many shards have ended
    (the run state's count, when there is a broker; else one listing of the store).
    """

    def __init__(
        self,
        store: ArtifactStore,
        run_id: str,
        *,
        manifest: RunManifest | None = None,
        seal: Callable[[], object] | None = None,
        ended: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self._manifest = manifest
        self._seal = seal
        self._ended = ended or (lambda: ended_in_store(store, run_id))

    def stored_result(self) -> RunResult | None:
        return load_result(self.store, self.run_id)

    def outline(self) -> RunOutline | None:
        return load_outline(self.store, self.run_id)

    def manifest(self) -> RunManifest:
        """The full manifest (read once)."""
        if self._manifest is None:
            self._manifest = load_manifest(self.store, self.run_id)
        return self._manifest

    def calibration(self, manifest: RunManifest) -> dict[str, CalibrationRecord]:
        return calibration_status(self.store, manifest)

    def outcomes(self, manifest: RunManifest, skip: Collection[str] = frozenset()) -> dict[str, ShardOutcome]:
        return collect_outcomes(self.store, manifest, skip)

    def lines(self, unreadable: list[int]) -> Iterator[OutcomeLine]:
        return stream_outcome_lines(self.store, self.run_id, unreadable)

    def ended(self) -> int:
        return self._ended()

    def seal(self) -> None:
        if self._seal is not None:
            self._seal()
