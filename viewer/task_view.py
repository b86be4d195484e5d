"""What a shard was asked: its case's prompt and expected output, or a trigger shard's query, whether
it should fire the skill and what fired; and the shard filters' values checked against the run.

A trigger shard holds no assertions and no grade: it is right or wrong by what fired, which its
trajectory and its outcome line record (``skills_fired``), never its grade.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from engine.segments import segment_keys_in_store
from engine.store import ArtifactStore
from schemas.errors import ConfigError
from schemas.manifest import trajectory_key
from schemas.shard import RunPlan, SkillBundle
from schemas.status import ShardState
from schemas.trajectory import Trajectory
from viewer.rows import VIEW_STATES, Query, Row, case_assertions

FOLD_CHARS = 1500
"""A prompt or expected output longer than this is folded (its first line stays in view)."""
FOLD_LINES = 25
SHOWN_VALUES = 12
"""Allowed values a refused filter names at most (an assertion filter may have thousands)."""


def _bundle(plan: RunPlan, skill: str) -> SkillBundle | None:
    return next((b for b in plan.bundles if b.skill == skill), None)


def _text(text: str) -> dict[str, Any]:
    long = len(text) > FOLD_CHARS or text.count("\n") > FOLD_LINES
    first = text.strip().splitlines()[0] if text.strip() else ""
    return {"text": text, "chars": len(text), "long": long, "first": first[:120]}


def task_document(plan: RunPlan, row: Row, trajectory: Trajectory | None) -> dict[str, Any]:
    """``case``: the prompt and expected output the judge graded against (None: not in the plan);
    ``trigger``: a trigger shard's query, should it fire, what fired and whether that was right."""
    bundle = _bundle(plan, row.skill)
    if bundle is not None and bundle.triggers is not None:
        query = next((t for t in bundle.triggers.triggers if t.id == row.case_id), None)
        fired = trajectory.skills_fired if trajectory and trajectory.skills_fired is not None else row.fired
        hit = None if fired is None else row.skill in fired
        trigger = {
            "skill": row.skill,
            "query": _text(query.query) if query else None,
            "should_fire": query.should_trigger if query else None,
            "fired": list(fired) if fired is not None else None,
            "skill_fired": hit,
            "right": None if hit is None or query is None else hit == query.should_trigger,
        }
        return {"case": None, "trigger": trigger}
    case = next((c for c in bundle.corpus.evals if c.id == row.case_id), None) if bundle else None
    if case is None:
        return {"case": None, "trigger": None}
    return {"case": {"prompt": _text(case.prompt), "expected": _text(case.expected_output)}, "trigger": None}


def _fired_in_segments(store: ArtifactStore, run_id: str) -> dict[str, tuple[str, ...]]:
    """Shard -> the skills that fired, from the newest outcome line of each trigger shard."""
    out: dict[str, tuple[str, ...]] = {}
    keys = segment_keys_in_store(store, run_id)
    raw = store.get_many(keys)
    for key in keys:  # in the order cut: a later line of a shard is its newer attempt
        for text in raw.get(key, b"").splitlines():
            try:
                line = json.loads(text)
                if line.get("skills_fired") is not None:
                    out[str(line["shard_id"])] = tuple(str(s) for s in line["skills_fired"])
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a line that does not parse is left out, as the reducer leaves it out
    return out


def _fired_in_trajectories(store: ArtifactStore, run_id: str, shard_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    keys = {trajectory_key(run_id, s): s for s in shard_ids}
    out = {}
    for key, raw in store.get_many(list(keys)).items():
        try:
            fired = json.loads(raw).get("skills_fired")
        except (ValueError, AttributeError):
            continue
        if fired is not None:
            out[keys[key]] = tuple(str(s) for s in fired)
    return out


def with_triggers(store: ArtifactStore, run_id: str, plan: RunPlan, rows: list[Row]) -> list[Row]:
    """A trigger run's rows with whether each should fire and what fired (from the outcome lines, or
    the trajectories of shards no sealed line names yet); other runs' rows as they are."""
    should = {(b.skill, t.id): t.should_trigger for b in plan.bundles if b.triggers for t in b.triggers.triggers}
    if not should:
        return rows
    fired = _fired_in_segments(store, run_id)
    graded = ShardState.GRADED.value
    fired |= _fired_in_trajectories(
        store, run_id, [r.shard_id for r in rows if r.state == graded and r.shard_id not in fired]
    )
    return [replace(r, should_fire=should.get((r.skill, r.case_id)), fired=fired.get(r.shard_id)) for r in rows]


def _allowed(name: str, value: str, values: list[str]) -> None:
    if value and value not in values:
        shown = ", ".join(repr(v) for v in values[:SHOWN_VALUES])
        more = f" and {len(values) - SHOWN_VALUES} more" if len(values) > SHOWN_VALUES else ""
        raise ConfigError(f"{name}={value!r} matches nothing in this run: {name} is one of {shown}{more}")


def check_query(query: Query, plan: RunPlan) -> None:
    """A :class:`ConfigError` (400) naming the filter whose value the run cannot hold, with the
    values it can: a typo is never answered with an empty list that reads as "nothing failed"."""
    _allowed("state", query.state, VIEW_STATES)
    _allowed("model", query.model, list(plan.rows))
    _allowed("arm", query.arm, list(plan.variants))
    texts = list(dict.fromkeys(t for case in case_assertions(plan).values() for t in case))
    _allowed("assertion", query.assertion, texts)
