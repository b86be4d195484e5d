"""One row per shard of a run, for the shard list: built once per reduced run, filtered and paged in memory.

Where the rows come from depends on how far the run is: the reduced result's per-shard rows
(runs of ordinary size), the outcome segments (a streamed run, whose result keeps no rows),
or the manifest with whatever outcomes and grades are stored so far (a run still going).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from engine.collect import SEGMENT_READ_BATCH
from engine.records import load_manifest, load_outcomes
from engine.segments import segment_keys_in_store
from engine.store import ArtifactStore
from schemas.corpus import assertion_text
from schemas.manifest import RunManifest, grade_key
from schemas.shard import RunPlan, row_name
from schemas.status import ShardState
from schemas.verdict import ShardGrade

PAGE = 50
MAX_PAGE = 500


@dataclass(frozen=True)
class Row:
    """One shard as the list shows it, from a result's row, an outcome line or the plan.

    Not an :class:`OutcomeLine`, though it names the same shard: ``model`` here is the row the
    figures count it in, and a big run's index is built from the lines' plain JSON, unvalidated.
    """

    shard_id: str
    variant: str
    skill: str
    case_id: int
    model: str
    """The shard's row: its model, or ``<harness> × <model>`` in a sweep (the run's figures are kept per row)."""
    epoch: int
    state: str
    passed: tuple[bool, ...] | None = None
    """Per assertion, for graded shards."""
    detail: str = ""
    should_fire: bool | None = None
    """A trigger shard: whether its query should fire the skill (None: not a trigger shard)."""
    fired: tuple[str, ...] | None = None
    """A trigger shard that ended with a record of it: the skills that fired, in order."""

    @property
    def failing(self) -> bool:
        if self.state != ShardState.GRADED.value:
            return self.state in _ENDED_BADLY
        if self.should_fire is not None:  # a trigger shard holds no assertions: it fails by firing wrongly
            return self.fired is not None and (self.skill in self.fired) != self.should_fire
        return self.passed is not None and not all(self.passed)

    def as_json(self) -> dict[str, object]:
        return {
            **asdict(self),
            "passed": list(self.passed) if self.passed is not None else None,
            "fired": list(self.fired) if self.fired is not None else None,
            "failing": self.failing,
        }


_ENDED_BADLY = {s.value for s in ShardState if s.terminal and s is not ShardState.GRADED}


def case_names(plan: RunPlan) -> dict[tuple[str, int], str]:
    """(skill, case id) -> the case's name, for the cases that have one (a plugin eval case's folder)."""
    return {(b.skill, c.id): c.name for b in plan.bundles for c in b.corpus.evals if c.name}


def case_assertions(plan: RunPlan) -> dict[tuple[str, int], list[str]]:
    """(skill, case id) -> the case's assertion texts."""
    return {(b.skill, c.id): [assertion_text(a) for a in c.assertions] for b in plan.bundles for c in b.corpus.evals}


def rows_from_result(case_runs: list[tuple[str, str, list[dict[str, Any]]]]) -> list[Row]:
    """Rows from the result's per-shard rows (``CaseRun`` as JSON), per (skill, variant)."""
    graded = ShardState.GRADED.value
    return [
        Row(
            r["shard_id"],
            variant,
            skill,
            r["case_id"],
            r["model"],
            r["epoch"],
            r["state"],
            tuple(bool(v["passed"]) for v in r.get("verdicts", [])) if r["state"] == graded else None,
            r.get("detail", ""),
        )
        for skill, variant, runs in case_runs
        for r in runs
    ]


def rows_from_segments(store: ArtifactStore, run_id: str) -> list[Row]:
    """The newest line of each shard in the sealed outcome segments.

    Only the fields a row needs are taken from each line (plain JSON, no model validation): the
    index of a 100,000-shard run is built in about a second instead of several; a line that does
    not parse is left out, as the streamed reducer leaves it out.
    """
    seen: set[str] = set()
    rows = []
    keys = segment_keys_in_store(store, run_id)[::-1]
    for start in range(0, len(keys), SEGMENT_READ_BATCH):
        batch = keys[start : start + SEGMENT_READ_BATCH]
        raw = store.get_many(batch)
        for key in batch:
            for text in reversed(raw.get(key, b"").splitlines()):
                row = _row_of_line(text)
                if row is not None and row.shard_id not in seen:
                    seen.add(row.shard_id)
                    rows.append(row)
    return rows


def _row_of_line(text: bytes) -> Row | None:
    try:
        d = json.loads(text)
        graded = d["state"] == ShardState.GRADED.value
        harness = d.get("harness")
        return Row(
            str(d["shard_id"]),
            str(d["variant"]),
            str(d["skill"]),
            int(d["case_id"]),
            row_name(str(d["model"]), None if harness is None else str(harness)),
            int(d["epoch"]),
            ShardState(d["state"]).value,
            tuple(bool(p) for p in d.get("passed", [])) if graded else None,
            str(d.get("detail", "")),
        )
    except (ValueError, KeyError, TypeError):
        return None


NOT_ENDED = "not ended"
"""The state a page shows for a shard without a stored outcome when no broker can say whether it
waits, runs or was lost (the store holds only ended shards)."""

VIEW_STATES = [*(s.value for s in ShardState), NOT_ENDED]
"""Every state a row can show."""


def rows_in_progress(store: ArtifactStore, manifest: RunManifest, live: Mapping[str, ShardState] | None) -> list[Row]:
    """Every shard of the plan: its stored outcome and grade when it ended, else its live state from
    the broker (queued when the broker has none yet), or :data:`NOT_ENDED` without a broker."""
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
        if record is not None:
            state = record.state.value
        else:
            state = NOT_ENDED if live is None else live.get(s.shard_id, ShardState.QUEUED).value
        rows.append(
            Row(
                s.shard_id,
                s.variant,
                s.skill,
                s.case_id,
                s.row,
                s.epoch,
                state,
                passed,
                record.detail if record else "",
            )
        )
    return rows


def load_rows(
    store: ArtifactStore,
    run_id: str,
    reduced: bool,
    case_runs: list[tuple[str, str, list[dict[str, Any]]]],
    live: Mapping[str, ShardState] | None,
) -> list[Row]:
    """A reduced run's rows from its result, or (a streamed result keeps none) from its segments; a
    run still going from its manifest and what is stored so far (``live``: the broker's states, None
    without a broker)."""
    if reduced:
        return rows_from_result(case_runs) if case_runs else rows_from_segments(store, run_id)
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
    text: str = ""
    """Case-insensitive search over the trajectories (of at most ``TRAJECTORY_SEARCH_MAX`` shards)."""
    offset: int = 0
    limit: int = PAGE

    def served(self) -> tuple[int, int]:
        """The page actually served, as ``(offset, limit)``: from 0, and 1 to ``MAX_PAGE`` rows; what
        the answer reports and the pager steps by, so an asked-for larger page skips no row."""
        return max(0, self.offset), max(1, min(self.limit, MAX_PAGE))


def select(rows: Iterable[Row], query: Query, texts: Mapping[tuple[str, int], list[str]]) -> tuple[list[Row], int]:
    """The page of rows that match, and how many match in all."""
    return page_of(matching(rows, query, texts), query)


def page_of(matched: list[Row], query: Query) -> tuple[list[Row], int]:
    offset, limit = query.served()
    return matched[offset : offset + limit], len(matched)


def matching(rows: Iterable[Row], query: Query, texts: Mapping[tuple[str, int], list[str]]) -> list[Row]:
    """Every row the query's filters (all but the trajectory search) let through."""
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
    return matched


def _fails_any(row: Row, positions: list[int]) -> bool:
    if row.passed is None:
        return row.failing
    return any(i < len(row.passed) and not row.passed[i] for i in positions)
