"""What the viewer reads: runs, a run's figures and live state, shard rows, one shard in full.

Figures come from the reducer's stored result, never recomputed here. A run's overview reads
its outline (a few KB at any size) and its result, and never the shard records, so a run of
100,000 shards opens as fast as one of ten. The broker, when given, adds live shard states and
spend while a run goes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis
from pydantic import ValidationError

from engine.collect import load_trajectory
from engine.delivery import Delivery, stall_bound
from engine.records import load_manifest, load_outline
from engine.settings import Settings, shown_url
from engine.state import RunState
from engine.store import RECORD_ID, ArtifactStore
from engine.usage import usage_totals
from schemas.errors import ConfigError, StoreError
from schemas.manifest import RunOutline, grade_key, outcome_key, result_key, run_end_key, trajectory_key
from schemas.outcome import ShardOutcomeRecord
from schemas.run_end import RunEnd
from schemas.verdict import ShardGrade
from viewer.live import counts_of_result, limiter_figures, live_figures
from viewer.rows import NOT_ENDED, Query, Row, case_assertions, case_names, load_rows, matching, page_of
from viewer.run_list import run_summary, unreadable_summary
from viewer.task_view import check_query, task_document, with_triggers

TRAJECTORY_SEARCH_MAX = 2000
"""Trajectories one search reads at most (the other filters narrow a big run first)."""
RESULT_TTL_S = 30.0
"""A reduced run's result is read again at most this often (``report`` may reduce it again)."""
WARM_INDEXES = 3
"""Reduced runs, newest first, whose shard index the start-up warm-up builds (about 30 MB per
100,000 shards)."""


class RunNotFound(StoreError):
    """No run of that id in the store."""


class RunUnreadable(StoreError):
    """A run whose records this version cannot read (written by another version, or damaged)."""


@dataclass
class _Cached:
    at: float
    outline: RunOutline
    result: dict[str, Any] | None
    """The stored result as JSON, without what grows with the run (see :func:`slim_result`)."""
    digest: str = ""
    """Of the stored result: the shard index is kept while it is unchanged."""
    case_runs: list[tuple[str, str, list[dict[str, Any]]]] = field(default_factory=list)
    """(skill, variant, per-shard rows) of a result that keeps them."""
    rows: list[Row] | None = None
    end: RunEnd | None = None
    """How a run without a result ended (refused by its checks, or its embedded run stopped)."""


@dataclass
class ViewerData:
    store: ArtifactStore
    broker_url: str | None = None
    _cache: dict[str, _Cached] = field(default_factory=dict)
    _redis: redis.Redis | None = None
    _rows_lock: threading.Lock = field(default_factory=threading.Lock)
    stall_after_s: float = field(default_factory=lambda: _stall_after_s(Settings()))
    """How long a run's shards may wait with none in flight before it is called stalled."""

    def _state(self) -> RunState | None:
        if not self.broker_url:
            return None
        if self._redis is None:
            self._redis = redis.Redis.from_url(self.broker_url, socket_timeout=2.0)
        return RunState(self._redis)

    def run(self, run_id: str) -> _Cached:
        """The run's outline and result, cached for ``RESULT_TTL_S`` (a run without a result is read each time)."""
        if not RECORD_ID.fullmatch(run_id):
            raise RunNotFound(f"no run {run_id!r}: not a run id")
        hit = self._cache.get(run_id)
        if hit is not None and hit.result is not None and time.monotonic() - hit.at < RESULT_TTL_S:
            return hit
        outline = self._outline(run_id)
        found = self.store.get_many([result_key(run_id), run_end_key(run_id)])
        raw = found.get(result_key(run_id))
        digest = hashlib.sha256(raw).hexdigest() if raw else ""
        if hit is not None and hit.digest and hit.digest == digest:
            hit.at = time.monotonic()  # the same result: keep what was built from it
            return hit
        entry = _Cached(time.monotonic(), outline, None, digest)
        if raw is not None:
            entry.result, entry.case_runs = slim_result(raw, run_id)
        elif run_end_key(run_id) in found:
            entry.end = _run_end(found[run_end_key(run_id)], run_id)
        self._cache[run_id] = entry
        return entry

    def _outline(self, run_id: str) -> RunOutline:
        try:
            outline = load_outline(self.store, run_id)
            if outline is None:
                if not self.store.exists(f"runs/{run_id}/manifest.json"):
                    raise RunNotFound(f"no run {run_id} in {self.store.uri}")
                outline = RunOutline.of(load_manifest(self.store, run_id))
        except ValidationError as exc:
            # One run another version wrote (or a damaged record) must not take the whole store's
            # list down: it is named, with the first field at fault, and the others are shown.
            first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": str(exc)}
            where = ".".join(str(part) for part in first["loc"]) or "the record"
            raise RunUnreadable(f"run {run_id}: its manifest cannot be read here: {where}: {first['msg']}") from exc
        return outline

    def run_ids(self) -> list[str]:
        """Every run in the store, newest first (run ids begin with their UTC time)."""
        return sorted(self.store.children("runs/"), reverse=True)

    def runs(self) -> list[dict[str, Any]]:
        items = []
        for run_id in self.run_ids():
            try:
                entry = self.run(run_id)
                items.append(run_summary(entry.outline, entry.result, entry.end, *self._progress_by(run_id)))
            except RunNotFound:
                continue  # a folder without a manifest (labels of a run deleted, a stray write)
            except RunUnreadable as exc:
                items.append(unreadable_summary(run_id, str(exc)))
        return items

    def warm(self) -> None:
        """Read every run's outline and result into the cache, and build the shard index of the
        newest reduced runs (a failure here is met again, and shown, when a page asks for it)."""
        with contextlib.suppress(Exception):
            reduced = [r["run_id"] for r in self.runs() if r["verdict"] is not None and r["ended"] is None]
            for run_id in reduced[:WARM_INDEXES]:
                self.rows(run_id)

    def _progress_by(self, run_id: str) -> tuple[str | None, str | None]:
        """The run's progress (:meth:`_progress`) and the broker that said it (its URL, password hidden)."""
        return self._progress(run_id), shown_url(self.broker_url) if self.broker_url else None

    def _progress(self, run_id: str) -> str | None:
        """``running``, ``stalled`` (the test ``status`` applies: shards wait, none in flight, nothing
        moved for longer than the fleet re-sends a lost message) or ``reduced``, from the broker;
        ``lost`` when the broker given does not know the run (lost with its data, or expired: nothing
        runs it); None without a broker (then not known: the store alone cannot tell a run going
        on a fleet from one whose command was killed)."""
        state = self._state()
        if state is None:
            return None
        if not state.exists(run_id):
            return "lost"
        if state.reduced(run_id):
            return "reduced"
        assert self._redis is not None
        return "stalled" if Delivery(self._redis).waiting(run_id).stalled(self.stall_after_s) else "running"

    def overview(self, run_id: str) -> dict[str, Any]:
        entry = self.run(run_id)
        doc = run_summary(entry.outline, entry.result, entry.end, *self._progress_by(run_id))
        doc["live"] = self.live(run_id, entry)
        doc["result"] = entry.result
        return doc

    def live(self, run_id: str, entry: _Cached) -> dict[str, Any]:
        """Shard counts by state (live from the broker, else from the stored result or outcomes), spend, ETA."""
        total = entry.outline.shard_count
        state = self._state()
        usage: dict[str, dict[str, Any]] = {}
        limits: dict[str, dict[str, Any]] = {}
        if state is not None and state.exists(run_id):
            counts, source = state.counts(run_id), "broker"
            assert self._redis is not None
            usage = usage_totals(self._redis, run_id)
            plan = entry.outline.manifest.plan
            limits = limiter_figures(self._redis, [*plan.models, *plan.judges], usage)
        elif entry.result is not None:
            counts, source = counts_of_result(entry.result), "result"
        else:
            ended = len(self.store.list(f"runs/{run_id}/outcomes/"))
            # A broker given that does not know the run: its shards not ended never will.
            counts, source = {"ended": ended, NOT_ENDED: total - ended}, "store" if state is None else "lost"
        return {**live_figures(entry.outline.manifest, total, counts, source, usage), "limits": limits}

    def rows(self, run_id: str) -> list[Row]:
        """The run's shard index; built once per result (handlers run in threads: one builds it
        while the others wait, instead of each reading a big run's segments again)."""
        with self._rows_lock:
            entry = self.run(run_id)
            if entry.rows is not None and entry.result is not None:
                return entry.rows
            state = self._state()
            live = state.states(run_id) if state is not None and state.exists(run_id) else None
            rows = load_rows(self.store, run_id, entry.result is not None, entry.case_runs, live)
            entry.rows = with_triggers(self.store, run_id, entry.outline.manifest.plan, rows)
            return entry.rows

    def shards(self, run_id: str, query: Query) -> dict[str, Any]:
        check_query(query, self.run(run_id).outline.manifest.plan)
        texts = case_assertions(self.run(run_id).outline.manifest.plan)
        matched = matching(self.rows(run_id), query, texts)
        if query.text:
            matched = self._in_trajectories(run_id, matched, query.text)
        page, total = page_of(matched, query)
        offset, limit = query.served()
        names = case_names(self.run(run_id).outline.manifest.plan)
        items = [r.as_json() | {"case_name": names.get((r.skill, r.case_id))} for r in page]
        return {"items": items, "total": total, "offset": offset, "limit": limit}

    def _in_trajectories(self, run_id: str, rows: list[Row], needle: str) -> list[Row]:
        """The rows whose trajectory holds ``needle`` (case-insensitive) in any event's text."""
        if len(rows) > TRAJECTORY_SEARCH_MAX:
            raise ConfigError(
                f"trajectory search reads at most {TRAJECTORY_SEARCH_MAX} trajectories and {len(rows)} shards "
                "match the other filters: narrow them first (failing only, a model, an assertion)"
            )
        folded = needle.casefold()
        found = set()
        for start in range(0, len(rows), 100):
            keys = {trajectory_key(run_id, r.shard_id): r.shard_id for r in rows[start : start + 100]}
            for key, raw in self.store.get_many(list(keys)).items():
                if _trajectory_holds(raw, folded):
                    found.add(keys[key])
        return [r for r in rows if r.shard_id in found]

    def row(self, run_id: str, shard_id: str) -> Row:
        """The shard's row; a named 404 for an id the run does not hold (or that is no id)."""
        row = (
            next((r for r in self.rows(run_id) if r.shard_id == shard_id), None)
            if RECORD_ID.fullmatch(shard_id)
            else None
        )
        if row is None:
            raise RunNotFound(f"no shard {shard_id!r} in run {run_id}")
        return row

    def shard(self, run_id: str, shard_id: str) -> dict[str, Any]:
        from viewer.shard_view import shard_document  # the trajectory's layout lives beside its template

        entry = self.run(run_id)
        rows = self.rows(run_id)
        row = self.row(run_id, shard_id)
        same_case = [
            r.as_json()
            for r in rows
            if (r.skill, r.case_id, r.model) == (row.skill, row.case_id, row.model) and r.shard_id != shard_id
        ]
        raw_grade = self.store.get_many([grade_key(run_id, shard_id)]).get(grade_key(run_id, shard_id))
        grade = ShardGrade.model_validate_json(raw_grade) if raw_grade else None
        raw_outcome = self.store.get_many([outcome_key(run_id, shard_id)]).get(outcome_key(run_id, shard_id))
        outcome = ShardOutcomeRecord.model_validate_json(raw_outcome) if raw_outcome else None
        trajectory = load_trajectory(self.store, run_id, shard_id)
        texts = case_assertions(entry.outline.manifest.plan).get((row.skill, row.case_id), [])
        doc = shard_document(row, texts, grade, outcome, trajectory) | task_document(
            entry.outline.manifest.plan, row, trajectory
        )
        doc["shard"]["case_name"] = case_names(entry.outline.manifest.plan).get((row.skill, row.case_id))
        doc["same_case"] = sorted(same_case, key=lambda r: (str(r["variant"]), str(r["epoch"])))
        return doc


def _trajectory_holds(raw: bytes, folded: str) -> bool:
    """Whether any event's text, call arguments or output holds ``folded`` (read as JSON, so an
    escaped quote or newline matches as the person typed it)."""
    try:
        events = json.loads(raw).get("events", [])
    except (ValueError, AttributeError):
        return False
    for event in events:
        parts = [event.get("text", ""), event.get("output", ""), event.get("name", "")]
        parts.append(json.dumps(event.get("arguments", {}), ensure_ascii=False))
        if any(folded in str(p).casefold() for p in parts):
            return True
    return False


def slim_result(raw: bytes, run_id: str) -> tuple[dict[str, Any], list[tuple[str, str, list[dict[str, Any]]]]]:
    """The stored result as JSON without what grows with the run: its per-shard rows (returned
    apart, for the shard list), the per-assertion matrix (a sweep keeps its harness × assertion
    rates as ``harness_matrix``) and the assertion quality list
    (``/api/runs/{run}/result`` serves it whole). Plain JSON, not the model: a 100,000-shard
    result is megabytes, and the viewer only reads it; one that is not a result is named."""
    try:
        doc = json.loads(raw)
        case_runs = [(s["skill"], s["variant"], s.pop("runs", [])) for s in doc["skills"]]
        for s in doc["skills"]:
            # A sweep's harness × assertion matrix is kept, its rates alone: it grows with the
            # corpus and the harnesses, never with the shards.
            matrix = [
                {
                    "case_id": a["case_id"],
                    "text": a["text"],
                    "by_harness": {h: r["rate"] for h, r in a["by_harness"].items()},
                }
                for a in s.pop("assertions", None) or []
                if a.get("by_harness")
            ]
            if matrix:
                s["harness_matrix"] = matrix
        doc.pop("assertion_quality", None)
        for comparison in [*doc.get("comparisons", []), *doc.get("harness_comparisons", [])]:
            comparison.pop("assertions", None)
            comparison.pop("per_case", None)
        doc["verdict"], doc["reasons"], doc["usage"]
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"run {run_id}: {result_key(run_id)} is not a run result: {exc}") from exc
    return doc, [c for c in case_runs if c[2]]


def _stall_after_s(settings: Settings) -> float:
    """The stall bound ``status`` holds a run to, from the same settings (the fleet's, when given)."""
    return stall_bound(settings.redeliver_after_s, settings.reaper_period_s)


def _run_end(raw: bytes, run_id: str) -> RunEnd:
    try:
        return RunEnd.model_validate_json(raw)
    except ValidationError as exc:
        raise RunUnreadable(f"run {run_id}: {run_end_key(run_id)} cannot be read here: {exc}") from exc
