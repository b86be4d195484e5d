"""A run's result from its records, for every caller: :func:`run_result`. Pure.

The reduce task, ``skill-eval report``, the end of ``run`` and the commands that read a
finished run (``assertions``, ``export``) all get a run's result here, so the choice between
the stored result, a streamed reduce and a reduce that keeps every shard's row is made in
one place. What a run's records are is read through :class:`RunRecords`
(:class:`engine.collect.StoredRun` reads them from the artifact store), so the reducer stays
free of I/O and the shared ground never imports the reducer.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from reducer.stream import StreamReducer, reduce_run
from schemas.manifest import RunManifest, RunOutline
from schemas.outcome import CalibrationRecord, OutcomeLine
from schemas.report import RunResult
from schemas.shard_outcome import ShardOutcome, outcome_line_of


class RunRecords(Protocol):
    """What a reduce reads of one run."""

    def stored_result(self) -> RunResult | None:
        """The result a reduce stored, or None."""

    def outline(self) -> RunOutline | None:
        """The manifest without its shard list, or None for a run stored before outlines were written."""

    def manifest(self) -> RunManifest:
        """The full manifest (a named error when there is none)."""

    def calibration(self, manifest: RunManifest) -> dict[str, CalibrationRecord]:
        """Judge -> its calibration record."""

    def outcomes(self, manifest: RunManifest, skip: Collection[str] = ...) -> Mapping[str, ShardOutcome]:
        """Shard id -> full records, for every ended shard not in ``skip``."""

    def lines(self, unreadable: list[int]) -> Iterator[OutcomeLine]:
        """Every sealed outcome line, newest first; unparsable lines counted in ``unreadable[0]``."""

    def ended(self) -> int:
        """How many shards have ended."""

    def seal(self) -> None:
        """Write the outcome lines not yet in a sealed segment into the store (a streamed reduce reads only those)."""


@dataclass
class Reduced:
    """A run's result and how it was come by."""

    result: RunResult
    manifest: RunManifest
    """The manifest the reduce used: without its shard list when streamed."""
    streamed: bool = False
    lines: int = 0
    """Streamed: lines read (every attempt of every shard)."""
    shards: int = 0
    """Streamed: distinct shards folded in."""
    rebuilt: int = 0
    """Streamed: shards no segment held, folded in from their full records."""
    unreadable: int = 0
    """Streamed: segment lines that did not parse (their shards are among the rebuilt ones)."""


def reduces_by_streaming(outline: RunOutline | None, threshold: int) -> bool:
    """Whether a run reduces from its outcome segments: at least ``threshold`` shards. A trigger run
    reduces from its full records (its figures need each shard's activations, a few thousand shards
    even for a repo of dozens of skills)."""
    if outline is not None and outline.manifest.settings.triggers is not None:
        return False
    return outline is not None and outline.shard_count >= threshold


def run_result(records: RunRecords, *, stream_from: int, reuse: bool = False) -> Reduced:
    """The run's result: the stored one when ``reuse`` and there is one; else a reduce, from the
    outcome segments when the run has at least ``stream_from`` shards, from every shard's full
    records (rows kept) otherwise. A plan with no shards (nothing left to run) reduces to what
    was left out and why: ``skipped`` corpora, and the ``reported`` ones with their earlier verdicts."""
    if reuse:
        stored = records.stored_result()
        if stored is not None:
            return Reduced(stored, records.manifest())
    outline = records.outline()
    if outline is not None and reduces_by_streaming(outline, stream_from):
        records.seal()
        return _streamed(records, outline)
    manifest = records.manifest()
    if not manifest.plan.shards:
        result = reduce_run(manifest.plan, {}, skipped=manifest.skipped, already_reported=manifest.reported)
        return Reduced(result, manifest)
    options = _options(manifest, records.calibration(manifest))
    return Reduced(reduce_run(manifest.plan, records.outcomes(manifest), **options), manifest)


def _options(manifest: RunManifest, calibration: Mapping[str, CalibrationRecord]) -> dict[str, Any]:
    settings = manifest.settings
    return {
        "fail_under": settings.fail_under,
        "plugin_threshold": settings.plugin_threshold,
        "regression_alpha": settings.regression_alpha,
        "require_uplift": settings.require_uplift,
        "calibration": calibration,
        "skipped": list(manifest.skipped),
        "already_reported": list(manifest.reported),
        "triggers": settings.triggers,
        "executor": settings.executor,
        "compare_guards": list(manifest.guards),
    }


def _compact(shard_id: str) -> int | str:
    """A shard id as the seen-set keeps it: its 16 hex digits as one int (about 60 instead of 95
    bytes each in a set of a million), any other id as it is."""
    if len(shard_id) == 16:
        try:
            return int(shard_id, 16)
        except ValueError:
            pass
    return shard_id


def _streamed(records: RunRecords, outline: RunOutline) -> Reduced:
    """Fold the outcome segments, newest line of each shard first, never loading the shard list.

    When the segments hold fewer shards than have ended (Redis lost unsealed lines), the
    missing shards are read from their full records, which needs the full manifest once.
    """
    manifest = outline.manifest
    fold = StreamReducer(manifest.plan)
    seen: set[int | str] = set()
    lines = 0
    unreadable = [0]
    for line in records.lines(unreadable):
        lines += 1
        key = _compact(line.shard_id)
        if key in seen:
            continue  # an older attempt of a shard already folded in
        seen.add(key)
        fold.add(line)
    rebuilt = 0
    if len(seen) < records.ended():
        full = records.manifest()
        skip = {s.shard_id for s in full.plan.shards if _compact(s.shard_id) in seen}
        for outcome in records.outcomes(full, skip).values():
            fold.add(outcome_line_of(outcome))
            rebuilt += 1
    result = fold.result(**_options(manifest, records.calibration(manifest)))
    return Reduced(result, manifest, True, lines, len(seen) + rebuilt, rebuilt, unreadable[0])
