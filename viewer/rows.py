"""One row per shard of a run, for the shard list: built once per reduced run, filtered and paged in memory.

Where the rows come from depends on how far the run is: the reduced result's per-shard rows
(runs of ordinary size), the outcome segments (a streamed run, whose result keeps no rows),
or the manifest with whatever outcomes and grades are stored so far (a run still going).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from engine.collect import stream_outcome_lines
from engine.records import load_manifest, load_outcomes
from engine.store import ArtifactStore
from schemas.corpus import assertion_text
from schemas.manifest import RunManifest, grade_key
from schemas.report import RunResult
from schemas.shard import RunPlan
from schemas.status import ShardState
from schemas.verdict import ShardGrade

PAGE = 50
MAX_PAGE = 500


@dataclass(frozen=True)
class Row:
    shard_id: str
    variant: str
    skill: str
    case_id: int
    model: str
    epoch: int
    state: str
    passed: tuple[bool, ...] | None = None
    """Per assertion, for graded shards."""
    detail: str = ""

    @property
    def failing(self) -> bool:
        if self.state != ShardState.GRADED.value:
            return self.state in _ENDED_BADLY
        return self.passed is not None and not all(self.passed)

    def as_json(self) -> dict[str, object]:
        return {
            **asdict(self),
            "passed": list(self.passed) if self.passed is not None else None,
            "failing": self.failing,
        }


_ENDED_BADLY = {s.value for s in ShardState if s.terminal and s is not ShardState.GRADED}


def case_assertions(plan: RunPlan) -> dict[tuple[str, int], list[str]]:
    """(skill, case id) -> the case's assertion texts."""
    return {(b.skill, c.id): [assertion_text(a) for a in c.assertions] for b in plan.bundles for c in b.corpus.evals}


def rows_from_result(result: RunResult) -> list[Row]:
    return [
        Row(
            r.shard_id,
            s.variant,
            s.skill,
            r.case_id,
            r.model,
            r.epoch,
            r.state.value,
            tuple(v.passed for v in r.verdicts) if r.state is ShardState.GRADED else None,
            r.detail,
        )
        for s in result.skills
        for r in s.runs
    ]


def rows_from_segments(store: ArtifactStore, run_id: str) -> list[Row]:
    """The newest line of each shard in the sealed outcome segments."""
    seen: set[str] = set()
    rows = []
    for line in stream_outcome_lines(store, run_id):
        if line.shard_id in seen:
            continue
        seen.add(line.shard_id)
        graded = line.state is ShardState.GRADED
        rows.append(
            Row(
                line.shard_id,
                line.variant,
                line.skill,
                line.case_id,
                line.model,
                line.epoch,
                line.state.value,
                tuple(line.passed) if graded else None,
                line.detail,
            )
        )
    return rows


def rows_in_progress(store: ArtifactStore, manifest: RunManifest, live: Mapping[str, ShardState]) -> list[Row]:
    """Every shard of the plan: its stored outcome and grade when it ended, else its live state (or queued)."""
    run_id = manifest.plan.run_id
    shards = manifest.plan.shards
    ended = load_outcomes(store, run_id, [s.shard_id for s in shards])
    raw_grades = store.get_many([grade_key(run_id, sid) for sid in ended])
    rows = []
    for s in shards:
        record = ended.get(s.shard_id)
        passed = None
        if record is not None and record.state is ShardState.GRADED:
            raw = raw_grades.get(grade_key(run_id, s.shard_id))
            passed = tuple(v.passed for v in ShardGrade.model_validate_json(raw).verdicts) if raw else None
        state = record.state if record else live.get(s.shard_id, ShardState.QUEUED)
        rows.append(
            Row(
                s.shard_id,
                s.variant,
                s.skill,
                s.case_id,
                s.model,
                s.epoch,
                state.value,
                passed,
                record.detail if record else "",
            )
        )
    return rows


def load_rows(store: ArtifactStore, run_id: str, result: RunResult | None, live: Mapping[str, ShardState]) -> list[Row]:
    if result is not None:
        rows = rows_from_result(result)
        if rows or not any(s.shard_count for s in result.skills):
            return rows
        return rows_from_segments(store, run_id)
    return rows_in_progress(store, load_manifest(store, run_id), live)


@dataclass(frozen=True)
class Query:
    failing: bool = False
    state: str = ""
    model: str = ""
    arm: str = ""
    assertion: str = ""
    """Exact assertion text: shards whose case has it (failing it, with ``failing``)."""
    q: str = ""
    """Case-insensitive search over the assertion texts of the shard's case."""
    offset: int = 0
    limit: int = PAGE


def select(rows: Iterable[Row], query: Query, texts: Mapping[tuple[str, int], list[str]]) -> tuple[list[Row], int]:
    """The page of rows that match, and how many match in all."""
    needle = query.q.casefold()
    matched = []
    for row in rows:
        if query.state and row.state != query.state:
            continue
        if query.model and row.model != query.model:
            continue
        if query.arm and row.variant != query.arm:
            continue
        case = texts.get((row.skill, row.case_id), [])
        if needle and not any(needle in t.casefold() for t in case):
            continue
        if query.assertion:
            positions = [i for i, t in enumerate(case) if t == query.assertion]
            if not positions:
                continue
            if query.failing and not _fails_any(row, positions):
                continue
        elif query.failing and not row.failing:
            continue
        matched.append(row)
    limit = max(1, min(query.limit, MAX_PAGE))
    offset = max(0, query.offset)
    return matched[offset : offset + limit], len(matched)


def _fails_any(row: Row, positions: list[int]) -> bool:
    if row.passed is None:
        return row.failing
    return any(i < len(row.passed) and not row.passed[i] for i in positions)
