"""Grade-only runs: grade recorded trajectories against a corpus without executing anything.

The recordings are sharded like a run (one shard per skill, case, model and epoch), stored
as the shards' trajectories, registered as ``executed`` and put on the grade queue; the
rest of the pipeline (grading, reduce, reports) is the same code as a full run. A planned
shard with no recording ends ``executor-failed`` ("no recorded trajectory"): it is counted
as not graded, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from engine.broker import Broker
from engine.importers import load_trajectories
from engine.records import put_manifest, put_outcome
from engine.segments import SegmentWriter
from engine.settings import Settings
from engine.state import RunState
from engine.store import ArtifactStore
from producer.launch.drive import drive
from producer.launch.submit import build_manifest
from producer.plan.planning import new_run_id, plan_run
from producer.plan.request import RunRequest, plan_request
from schemas.constants import QUEUE_GRADE, QUEUE_REDUCE
from schemas.manifest import RunManifest, trajectory_key
from schemas.outcome import ShardOutcomeRecord
from schemas.report import RunResult
from schemas.shard import SkillBundle, shard_id_for
from schemas.shard_outcome import outcome_line
from schemas.status import ShardState
from schemas.trajectory import Trajectory

Recorded = tuple[str, int, int, Trajectory]
"""(skill, case id, epoch, trajectory), as engine.importers.load_trajectories returns."""


def recorded_models(recorded: Sequence[Recorded]) -> list[str]:
    """Distinct executor labels of the recordings, in first-seen order."""
    seen: dict[str, None] = {}
    for _, _, _, t in recorded:
        seen.setdefault(t.model or "recorded", None)
    return list(seen) or ["recorded"]


def select(recorded: Sequence[Recorded], bundles: Sequence[SkillBundle]) -> tuple[list[Recorded], list[str]]:
    """Keep recordings of planned skills and known cases; name the ones ignored."""
    known = {b.skill: {c.id for c in b.corpus.evals} for b in bundles}
    kept, ignored = [], []
    for item in recorded:
        skill, case_id, epoch, _ = item
        if skill in known and case_id in known[skill]:
            kept.append(item)
        elif skill in known:
            ignored.append(f"{skill}/case-{case_id} (epoch {epoch}): no such case in the corpus")
    return kept, ignored


def submit_recorded(
    manifest: RunManifest,
    recorded: Sequence[Recorded],
    store: ArtifactStore,
    state: RunState,
    broker: Broker,
    *,
    stored_key: str | None = None,
) -> int:
    """Store each recording under its shard, register the run, enqueue grading; return shards enqueued.

    ``stored_key``: the key the manifest is already stored under (it is not written again).
    """
    plan = manifest.plan
    run_id = plan.run_id
    key = stored_key or put_manifest(store, manifest)
    by_shard: dict[str, Trajectory] = {}
    for skill, case_id, epoch, trajectory in recorded:
        shard_id = shard_id_for(run_id, "current", skill, case_id, trajectory.model or "recorded", epoch)
        by_shard[shard_id] = trajectory.model_copy(update={"shard_id": shard_id})
    state.register(
        run_id,
        [s.shard_id for s in plan.shards],
        key,
        plan.created_at.isoformat(),
        ShardState.EXECUTED,
    )
    count = 0
    segments = SegmentWriter(state.r, store)
    for shard in plan.shards:
        recording = by_shard.get(shard.shard_id)
        if recording is None:
            detail = f"no recorded trajectory for {shard.skill} case {shard.case_id} epoch {shard.epoch}"
            failed = ShardState.EXECUTOR_FAILED
            record = ShardOutcomeRecord(state=failed, detail=detail, status=failed.value)
            put_outcome(store, run_id, shard.shard_id, record)
            segments.push(run_id, outcome_line(shard, record, None, None))
            if state.transition(run_id, shard.shard_id, ShardState.EXECUTOR_FAILED).finished_run:
                broker.send(QUEUE_REDUCE, run_id)
            continue
        store.put(trajectory_key(run_id, shard.shard_id), recording.model_dump_json().encode())
        broker.send(QUEUE_GRADE, run_id, shard.shard_id)
        count += 1
    return count


def grade_recorded(
    req: RunRequest, trajectories: str, settings: Settings, out: Console, err: Console
) -> RunResult | str:
    """``skill-eval grade``: shard recorded trajectories and grade them like a run."""
    recorded = load_trajectories(trajectories)
    if not req.skills and not req.all_evals:
        req.skills = sorted({skill for skill, _, _, _ in recorded})
    repo, bundles, skipped = plan_request(req, out)
    kept, ignored = select(recorded, bundles)
    for line in ignored:
        err.print(f"ignored recording {line}", markup=False)
    epochs = max((epoch for _, _, epoch, _ in kept), default=0) + 1
    models = recorded_models(kept)
    plan = plan_run(new_run_id(), bundles, models, judges=req.judges, epochs=epochs, sandbox=settings.sandbox)
    run_settings = req.settings.model_copy(update={"executor": f"recorded:{trajectories}"})
    manifest = build_manifest(plan, repo.root, None, run_settings, out_dir=str(req.out), skipped=skipped)

    def submitter(m: RunManifest, st: ArtifactStore, state: RunState, broker: Broker, stored: str | None) -> int:
        return submit_recorded(m, kept, st, state, broker, stored_key=stored)

    return drive(manifest, submitter, req, settings, out, err)
