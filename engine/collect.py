"""Read a run's stored results back into reducer inputs. Used by the reduce task and `skill-eval report`.

Everything a report needs is in the artifact store (grades, outcomes, trajectories,
calibration), so a report can be rebuilt anywhere, even after the broker is gone.
"""

from __future__ import annotations

import json

from engine.store import ArtifactStore
from reducer.scoring import NOT_CALIBRATED_MISSING, ShardOutcome, reduce_run
from schemas.manifest import RunManifest, calibration_key, grade_key, outcome_key, trajectory_key
from schemas.report import RunResult
from schemas.status import ShardState
from schemas.trajectory import Trajectory, Usage
from schemas.verdict import ShardGrade


def load_trajectory(store: ArtifactStore, run_id: str, shard_id: str) -> Trajectory | None:
    key = trajectory_key(run_id, shard_id)
    return Trajectory.model_validate_json(store.get(key)) if store.exists(key) else None


def collect_outcomes(store: ArtifactStore, manifest: RunManifest) -> dict[str, ShardOutcome]:
    """Shard id -> outcome, for every shard that reached a terminal state (others are absent)."""
    run_id = manifest.plan.run_id
    out: dict[str, ShardOutcome] = {}
    for shard in manifest.plan.shards:
        okey, gkey = outcome_key(run_id, shard.shard_id), grade_key(run_id, shard.shard_id)
        if not store.exists(okey):
            continue  # not terminal (yet)
        raw = json.loads(store.get(okey))
        state = ShardState(raw["state"])
        grade = ShardGrade.model_validate_json(store.get(gkey)) if store.exists(gkey) else None
        if grade is not None and grade.state is not state:
            grade = None  # left over from an earlier attempt of a re-run shard
        trajectory = load_trajectory(store, run_id, shard.shard_id)
        out[shard.shard_id] = ShardOutcome(
            shard,
            state,
            grade=grade,
            detail=raw["detail"],
            sandbox=trajectory.sandbox if trajectory else None,
            end_reason=trajectory.end_reason.value if trajectory else "",
            usage=trajectory.usage if trajectory else Usage(),
            template_hashes=trajectory.template_hashes if trajectory else {},
        )
    return out


def calibration_status(store: ArtifactStore, manifest: RunManifest) -> dict[str, str]:
    status = {}
    for judge in manifest.plan.judges:
        key = calibration_key(manifest.plan.run_id, judge)
        if not manifest.settings.calibrate:
            status[judge] = "not calibrated (--no-calibration)"
        elif store.exists(key):
            status[judge] = json.loads(store.get(key))["status"]
        else:
            status[judge] = NOT_CALIBRATED_MISSING
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
