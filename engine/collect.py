"""Read a run's stored results back into reducer inputs. Used by the reduce task and `skill-eval report`.

Everything a report needs is in the artifact store (grades, outcomes, trajectories,
calibration), so a report can be rebuilt anywhere, even after the broker is gone.
"""

from __future__ import annotations

from engine.records import load_calibration, load_outcomes
from engine.store import ArtifactStore
from reducer.scoring import ShardOutcome, reduce_run
from schemas.manifest import RunManifest, grade_key, trajectory_key
from schemas.outcome import CalibrationRecord, CalibrationStatus
from schemas.report import RunResult
from schemas.trajectory import Trajectory, Usage
from schemas.verdict import ShardGrade


def load_trajectory(store: ArtifactStore, run_id: str, shard_id: str) -> Trajectory | None:
    key = trajectory_key(run_id, shard_id)
    return Trajectory.model_validate_json(store.get(key)) if store.exists(key) else None


COLLECT_BATCH = 500
"""Shards whose records are read together (``get_many``: parallel reads on S3, one pass locally)."""


def collect_outcomes(store: ArtifactStore, manifest: RunManifest) -> dict[str, ShardOutcome]:
    """Shard id -> outcome, for every shard that reached a terminal state (others are absent).

    Records are read ``COLLECT_BATCH`` shards at a time, each kind in one batched read, so
    a reduce on S3 costs parallel round trips instead of three sequential ones per shard.
    """
    run_id = manifest.plan.run_id
    out: dict[str, ShardOutcome] = {}
    shards = manifest.plan.shards
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
            )
    return out


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


def reduce_from_store(store: ArtifactStore, manifest: RunManifest, skipped: list[str] | None = None) -> RunResult:
    return reduce_run(
        manifest.plan,
        collect_outcomes(store, manifest),
        fail_under=manifest.settings.fail_under,
        regression_alpha=manifest.settings.regression_alpha,
        require_uplift=manifest.settings.require_uplift,
        calibration=calibration_status(store, manifest),
        skipped=skipped or list(manifest.skipped),
    )
