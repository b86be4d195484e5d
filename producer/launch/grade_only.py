"""Grade-only runs: grade recorded trajectories against a corpus without executing anything.

Only the recordings that exist are planned: one shard per recording, under its skill, case,
epoch (the file's own number, 0- or 1-based as written) and model, stored as the shard's
trajectory, registered as ``executed`` and put on the grade queue; the rest of the pipeline
(grading, reduce, reports) is the same code as a full run. A recording absent is no shard:
nothing is counted as an executor failure of the evaluator, and a corpus case with no
recording at all is named as skipped (a warning in the verdict), never silently dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Console

from engine.broker import Broker
from engine.importers import load_trajectories
from engine.records import put_manifest
from engine.settings import Settings
from engine.state import RunState
from engine.store import ArtifactStore
from producer.launch.drive import drive
from producer.launch.submit import build_manifest
from producer.plan.planning import new_run_id
from producer.plan.request import RunRequest, plan_request
from schemas.constants import QUEUE_GRADE
from schemas.errors import ConfigError
from schemas.manifest import RunManifest, trajectory_key
from schemas.report import RunResult
from schemas.shard import CURRENT, RunPlan, Shard, SkillBundle, shard_id_for
from schemas.status import SandboxMode, ShardState
from schemas.trajectory import Trajectory
from schemas.visible import visible

MAX_PRINTED_WARNINGS = 20
"""Warnings of one kind printed before the rest are counted."""
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


def recorded_plan(
    run_id: str,
    bundles: Sequence[SkillBundle],
    kept: Sequence[Recorded],
    *,
    judges: Sequence[str],
    sandbox: SandboxMode,
) -> RunPlan:
    """The plan of exactly the recordings kept, in plan order (skill as given, case, model, epoch).

    ``epochs`` is the most recordings any (skill, case, model) has; epoch numbers are labels.
    """
    order = {b.skill: i for i, b in enumerate(bundles)}
    models = recorded_models(kept)
    shards = sorted(
        (
            Shard.planned(run_id, CURRENT, skill, case_id, t.model or "recorded", epoch)
            for skill, case_id, epoch, t in kept
        ),
        key=lambda s: (order[s.skill], s.case_id, models.index(s.model), s.epoch),
    )
    per_cell = Counter((s.skill, s.case_id, s.model) for s in shards)
    return RunPlan(
        run_id=run_id,
        bundles=tuple(bundles),
        models=tuple(models),
        judges=tuple(judges),
        epochs=max(per_cell.values(), default=1),
        shards=tuple(shards),
        sandbox=sandbox,
    )


def unrecorded(bundles: Sequence[SkillBundle], kept: Sequence[Recorded], root: str) -> list[str]:
    """The corpus cases no recording holds: each named, so the verdict warns of what was not graded."""
    have = {(skill, case_id) for skill, case_id, _, _ in kept}
    return [
        f"{b.skill} case {c.id}: no recording under {root}; not graded"
        for b in bundles
        for c in b.corpus.evals
        if (b.skill, c.id) not in have
    ]


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
    Every planned shard has its recording (:func:`recorded_plan`).
    """
    plan = manifest.plan
    run_id = plan.run_id
    key = stored_key or put_manifest(store, manifest)
    by_shard: dict[str, Trajectory] = {}
    for skill, case_id, epoch, trajectory in recorded:
        shard_id = shard_id_for(run_id, CURRENT, skill, case_id, trajectory.model or "recorded", epoch)
        by_shard[shard_id] = trajectory.model_copy(update={"shard_id": shard_id})
    state.register(
        run_id,
        [s.shard_id for s in plan.shards],
        key,
        plan.created_at.isoformat(),
        ShardState.EXECUTED,
    )
    for shard in plan.shards:
        store.put(trajectory_key(run_id, shard.shard_id), by_shard[shard.shard_id].model_dump_json().encode())
        broker.send(QUEUE_GRADE, run_id, shard.shard_id)
    return len(plan.shards)


def _print_capped(err: Console, lines: Sequence[str]) -> None:
    """The first :data:`MAX_PRINTED_WARNINGS` lines, then how many more: a folder of thousands of
    stray files must not flood the terminal."""
    for line in lines[:MAX_PRINTED_WARNINGS]:
        err.print(line, markup=False)
    if len(lines) > MAX_PRINTED_WARNINGS:
        err.print(f"... and {len(lines) - MAX_PRINTED_WARNINGS} more like these, not shown", markup=False)


def grade_recorded(
    req: RunRequest, trajectories: str, settings: Settings, out: Console, err: Console
) -> RunResult | str:
    """``skill-eval grade``: shard recorded trajectories and grade them like a run."""
    notes: list[str] = []
    recorded = load_trajectories(trajectories, notes)
    _print_capped(err, [f"warning: {visible(line)}" for line in notes])
    if not req.skills and not req.all_evals:
        req.skills = sorted({skill for skill, _, _, _ in recorded})
    repo, bundles, skipped = plan_request(req, out)
    kept, ignored = select(recorded, bundles)
    _print_capped(err, [f"ignored recording {visible(line)}" for line in ignored])
    missing = unrecorded(bundles, kept, trajectories)
    _print_capped(err, [f"warning: {visible(line)}" for line in missing])
    if not kept:
        raise ConfigError(f"{trajectories}: no recording of a case in the corpora planned; nothing to grade")
    plan = recorded_plan(new_run_id(), bundles, kept, judges=req.judges, sandbox=settings.sandbox)
    run_settings = req.settings.model_copy(update={"executor": f"recorded:{trajectories}"})
    manifest = build_manifest(plan, repo.root, None, run_settings, out_dir=str(req.out), skipped=skipped + missing)

    def submitter(m: RunManifest, st: ArtifactStore, state: RunState, broker: Broker, stored: str | None) -> int:
        return submit_recorded(m, kept, st, state, broker, stored_key=stored)

    return drive(manifest, submitter, req, settings, out, err)
