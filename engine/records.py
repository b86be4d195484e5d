"""The typed records of a run in the artifact store: written and read through their models only.

Each record carries a ``version``; a reader validates it with the model, so a record written
by another release (or by hand) fails loudly as a validation error instead of being half read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from pydantic import ValidationError

from engine.store import ArtifactStore
from schemas.comparison import NoiseRecord
from schemas.errors import StoreError
from schemas.manifest import (
    RunManifest,
    RunOutline,
    attempt_key,
    calibration_key,
    grade_key,
    manifest_key,
    noise_key,
    outcome_key,
    outline_key,
    result_key,
    run_end_key,
)
from schemas.outcome import CalibrationRecord, ShardOutcomeRecord
from schemas.report import RunResult
from schemas.run_end import RunEnd
from schemas.shard import CURRENT, SkillBundle
from schemas.verdict import ShardGrade

_Record = TypeVar("_Record", ShardOutcomeRecord, ShardGrade)


def put_manifest(store: ArtifactStore, manifest: RunManifest) -> str:
    """Store the manifest and its outline; the manifest's key."""
    key = manifest_key(manifest.plan.run_id)
    store.put(key, manifest.model_dump_json().encode())
    put_outline(store, manifest)
    return key


def put_outline(store: ArtifactStore, manifest: RunManifest) -> None:
    """Store the outline of (this revision of) the manifest, for a reduce that never loads the shard list."""
    store.put(outline_key(manifest.plan.run_id), RunOutline.of(manifest).model_dump_json().encode())


def load_outline(store: ArtifactStore, run_id: str) -> RunOutline | None:
    """The run's outline, or None for a run submitted before outlines were written."""
    key = outline_key(run_id)
    return RunOutline.model_validate_json(store.get(key)) if store.exists(key) else None


def load_manifest(store: ArtifactStore, run_id: str) -> RunManifest:
    """The run's manifest; :class:`StoreError` naming the key when there is none."""
    key = manifest_key(run_id)
    if not store.exists(key):
        raise StoreError(f"run {run_id}: no manifest at {key} in {store.uri}")
    return RunManifest.model_validate_json(store.get(key))


def put_outcome(store: ArtifactStore, run_id: str, shard_id: str, outcome: ShardOutcomeRecord) -> None:
    store.put(outcome_key(run_id, shard_id), outcome.model_dump_json().encode())


def commit_outcome(
    store: ArtifactStore, run_id: str, shard_id: str, attempt: int, outcome: ShardOutcomeRecord
) -> ShardOutcomeRecord:
    """Commit the attempt's outcome, first writer wins; the committed one (ours, or an earlier
    delivery's) also becomes the shard's current outcome. Two deliveries of one attempt that
    both finish can never both count: the later one adopts the earlier one's record."""
    committed = _commit(store, attempt_key(run_id, attempt, "outcomes", shard_id), outcome)
    put_outcome(store, run_id, shard_id, committed)
    return committed


def commit_grade(store: ArtifactStore, run_id: str, shard_id: str, attempt: int, grade: ShardGrade) -> ShardGrade:
    """The same for the attempt's grade."""
    committed = _commit(store, attempt_key(run_id, attempt, "grades", shard_id), grade)
    store.put(grade_key(run_id, shard_id), committed.model_dump_json().encode())
    return committed


def _commit(store: ArtifactStore, key: str, record: _Record) -> _Record:
    if store.put_new(key, record.model_dump_json().encode()):
        return record
    return type(record).model_validate_json(store.get(key))


def load_outcome(store: ArtifactStore, run_id: str, shard_id: str) -> ShardOutcomeRecord | None:
    """How the shard ended, or None while it has not."""
    key = outcome_key(run_id, shard_id)
    return ShardOutcomeRecord.model_validate_json(store.get(key)) if store.exists(key) else None


def load_outcomes(store: ArtifactStore, run_id: str, shard_ids: Sequence[str]) -> dict[str, ShardOutcomeRecord]:
    """How each of ``shard_ids`` ended, in one batched read; shards that have not ended are absent."""
    keys = {outcome_key(run_id, s): s for s in shard_ids}
    return {keys[k]: ShardOutcomeRecord.model_validate_json(raw) for k, raw in store.get_many(list(keys)).items()}


def put_result(store: ArtifactStore, result: RunResult) -> None:
    """The reduced result; a ``--baseline same`` run also leaves its noise floor for later runs' power figures."""
    store.put(result_key(result.run_id), result.model_dump_json().encode())
    for record in noise_records(result):
        older = load_noise(store, record.skill, record.corpus_file)
        if older is None or older.run_id <= record.run_id:  # reporting an old run again keeps the newer figure
            store.put(noise_key(record.skill), record.model_dump_json().encode())


def noise_records(result: RunResult) -> list[NoiseRecord]:
    """One record per corpus whose current skill ran against itself and had a pair flip."""
    current = {s.skill: s for s in result.skills if s.variant == CURRENT}
    return [
        NoiseRecord(
            run_id=result.run_id,
            skill=c.skill,
            corpus_file=current[c.skill].corpus_file,
            bundle_key=current[c.skill].bundle_key,
            discordance=c.noise.discordance,
            pairs=c.noise.pairs,
            cases=c.noise.cases,
        )
        for c in result.comparisons
        if c.model is None and c.noise is not None and c.noise.flips and c.skill in current
    ]


def load_noise(store: ArtifactStore, skill: str, corpus_file: str) -> NoiseRecord | None:
    """The latest noise floor of this skill's corpus, or None: none measured, another corpus file,
    or a record that does not validate (a damaged hint must not stop a run; the assumed figure serves)."""
    key = noise_key(skill)
    if not store.exists(key):
        return None
    try:
        record = NoiseRecord.model_validate_json(store.get(key))
    except ValidationError:
        return None
    if record.corpus_file != corpus_file or record.skill != skill or not 0 < record.discordance <= 1:
        return None
    return record


def load_result(store: ArtifactStore, run_id: str) -> RunResult | None:
    """The reduced result, or None before the run is reduced."""
    key = result_key(run_id)
    return RunResult.model_validate_json(store.get(key)) if store.exists(key) else None


def put_run_end(store: ArtifactStore, end: RunEnd) -> None:
    """Record that the run ended without a result (schemas/run_end.py)."""
    store.put(run_end_key(end.run_id), end.model_dump_json().encode())


def load_run_end(store: ArtifactStore, run_id: str) -> RunEnd | None:
    """How the run ended without a result, or None: it has a result, or it may still be going."""
    key = run_end_key(run_id)
    return RunEnd.model_validate_json(store.get(key)) if store.exists(key) else None


def put_calibration(store: ArtifactStore, run_id: str, record: CalibrationRecord) -> None:
    store.put(calibration_key(run_id, record.judge), record.model_dump_json().encode())


def load_calibration(store: ArtifactStore, run_id: str, judge: str) -> CalibrationRecord | None:
    key = calibration_key(run_id, judge)
    return CalibrationRecord.model_validate_json(store.get(key)) if store.exists(key) else None


def latest_noise(store: ArtifactStore, bundles: Sequence[SkillBundle]) -> dict[str, NoiseRecord]:
    """Skill -> the latest noise floor measured on its corpus, for the corpora that have one."""
    found = {b.skill: load_noise(store, b.skill, b.corpus_file) for b in bundles}
    return {skill: record for skill, record in found.items() if record is not None}
