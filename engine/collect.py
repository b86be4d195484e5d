"""Read a run's stored results back into reducer inputs. Used by the reduce task and `skill-eval report`.

Everything a report needs is in the artifact store (grades, outcomes, trajectories,
calibration), so a report can be rebuilt anywhere, even after the broker is gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from engine.records import load_calibration, load_manifest, load_outcomes
from engine.segments import outcome_line, read_segment, segment_keys_in_store
from engine.store import ArtifactStore
from reducer.scoring import ShardOutcome, reduce_run
from reducer.stream import StreamReducer
from schemas.manifest import RunManifest, RunOutline, grade_key, trajectory_key
from schemas.outcome import CalibrationRecord, CalibrationStatus, OutcomeLine, ShardOutcomeRecord
from schemas.report import RunResult
from schemas.trajectory import Trajectory, Usage
from schemas.verdict import ShardGrade


def load_trajectory(store: ArtifactStore, run_id: str, shard_id: str) -> Trajectory | None:
    key = trajectory_key(run_id, shard_id)
    return Trajectory.model_validate_json(store.get(key)) if store.exists(key) else None


COLLECT_BATCH = 500
"""Shards whose records are read together (``get_many``: parallel reads on S3, one pass locally)."""


def collect_outcomes(
    store: ArtifactStore, manifest: RunManifest, skip: set[str] | frozenset[str] = frozenset()
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
                skills_fired=_fired(trajectory),
                proposed_calls=tuple(trajectory.proposed_calls) if trajectory else (),
                refused_requests=tuple(trajectory.refused_requests) if trajectory else (),
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


def reduce_from_store(store: ArtifactStore, manifest: RunManifest, skipped: list[str] | None = None) -> RunResult:
    return reduce_run(
        manifest.plan,
        collect_outcomes(store, manifest),
        fail_under=manifest.settings.fail_under,
        regression_alpha=manifest.settings.regression_alpha,
        require_uplift=manifest.settings.require_uplift,
        calibration=calibration_status(store, manifest),
        skipped=skipped or list(manifest.skipped),
        triggers=manifest.settings.triggers,
        executor=manifest.settings.executor,
    )


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


def _compact(shard_id: str) -> int | str:
    """A shard id as the seen-set keeps it: its 16 hex digits as one int (about 60 instead of 95
    bytes each in a set of a million), any other id as it is."""
    if len(shard_id) == 16:
        try:
            return int(shard_id, 16)
        except ValueError:
            pass
    return shard_id


def _rebuild_lines(store: ArtifactStore, manifest: RunManifest, seen: set[int | str]) -> Iterator[OutcomeLine]:
    """Lines for ended shards no segment holds (Redis lost them), from their full records."""
    skip = {s.shard_id for s in manifest.plan.shards if _compact(s.shard_id) in seen}
    for outcome in collect_outcomes(store, manifest, skip=skip).values():
        yield outcome_line_of(outcome)


def outcome_line_of(o: ShardOutcome) -> OutcomeLine:
    """The outcome line of a shard read back from its full records."""
    record = ShardOutcomeRecord(state=o.state, detail=o.detail, stops_run=o.stops_run)
    line = outcome_line(o.shard, record, o.grade, None)
    return line.model_copy(
        update={
            "sandbox": o.sandbox.value if o.sandbox else None,
            "end_reason": o.end_reason,
            "usage": (o.usage.prompt_tokens, o.usage.completion_tokens, o.usage.calls, o.usage.cost_usd),
            "template_hashes": {**o.template_hashes, **(o.grade.template_hashes if o.grade else {})},
            "skill_activated": o.skill_activated,
            "rejected_calls": len(o.rejected_calls),
            "skills_fired": list(o.skills_fired) if o.skills_fired is not None else None,
        }
    )


@dataclass
class StreamedReduce:
    """A streamed reduce's result and what it read."""

    result: RunResult
    lines: int
    """Lines read (every attempt of every shard)."""
    shards: int
    """Distinct shards folded in."""
    rebuilt: int
    """Shards no segment held, folded in from their full records."""
    unreadable: int = 0
    """Segment lines that did not parse (their shards are among the rebuilt ones)."""


def reduces_by_streaming(outline: RunOutline | None, threshold: int) -> bool:
    """Whether a run reduces from its outcome segments: at least ``threshold`` shards. A trigger run
    reduces from its full records (its figures need each shard's activations, a few thousand shards
    even for a repo of dozens of skills)."""
    if outline is not None and outline.manifest.settings.triggers is not None:
        return False
    return outline is not None and outline.shard_count >= threshold


def ended_in_store(store: ArtifactStore, run_id: str) -> int:
    """How many shards have an outcome record (one listing: about a request per 1,000 shards on S3)."""
    return len(store.list(f"runs/{run_id}/outcomes/"))


def reduce_streamed(store: ArtifactStore, outline: RunOutline, ended: int | None = None) -> StreamedReduce:
    """Reduce from the outcome segments, newest line of each shard first, never loading the shard list.

    ``ended`` is how many shards the run state says have ended: when the segments hold fewer
    (Redis lost unsealed lines), the missing shards are read from their full records, which
    needs the full manifest once.
    """
    manifest = outline.manifest
    run_id = manifest.plan.run_id
    reducer = StreamReducer(manifest.plan)
    seen: set[int | str] = set()
    lines = 0
    unreadable = [0]
    for line in stream_outcome_lines(store, run_id, unreadable):
        lines += 1
        key = _compact(line.shard_id)
        if key in seen:
            continue  # an older attempt of a shard already folded in
        seen.add(key)
        reducer.add(line)
    rebuilt = 0
    if ended is not None and len(seen) < ended:
        for line in _rebuild_lines(store, load_manifest(store, run_id), seen):
            reducer.add(line)
            rebuilt += 1
    settings = manifest.settings
    result = reducer.result(
        fail_under=settings.fail_under,
        calibration=calibration_status(store, manifest),
        skipped=list(manifest.skipped),
        regression_alpha=settings.regression_alpha,
        require_uplift=settings.require_uplift,
    )
    return StreamedReduce(result, lines, len(seen) + rebuilt, rebuilt, unreadable[0])
