"""People's labels of judge verdicts, as versioned records in the artifact store.

Each label is its own object, ``runs/<run>/labels/<shard>/<assertion>-<time>-<random>.json``,
written once and never replaced: a reviewer who changes their mind adds a newer one. So two
reviewers labelling at once never overwrite each other, on a local folder as on S3.
"""

from __future__ import annotations

import getpass
import os
import secrets
from collections.abc import Mapping

from engine.records import load_manifest
from engine.store import RECORD_ID, ArtifactStore
from schemas.errors import ConfigError
from schemas.label import COMBINED, HumanLabel
from schemas.manifest import grade_key, outcome_key
from schemas.outcome import ShardOutcomeRecord
from schemas.status import ShardState
from schemas.verdict import AssertionVerdict, ShardGrade


def labels_prefix(run_id: str) -> str:
    return f"runs/{run_id}/labels/"


def put_label(store: ArtifactStore, label: HumanLabel) -> str:
    """Store ``label`` as a new record; its key."""
    stamp = label.at.strftime("%Y%m%dT%H%M%S%fZ")
    key = f"{labels_prefix(label.run_id)}{label.shard_id}/{label.assertion}-{stamp}-{secrets.token_hex(4)}.json"
    store.put_new(key, label.model_dump_json().encode())
    return key


def load_labels(store: ArtifactStore, run_id: str) -> list[HumanLabel]:
    """Every label of the run, oldest first."""
    raw = store.get_many(store.list(labels_prefix(run_id)))
    return sorted((HumanLabel.model_validate_json(v) for v in raw.values()), key=lambda x: x.at)


def reviewer_name() -> str:
    """Who is labelling: ``SKILL_EVAL_REVIEWER``, else the login name."""
    name = os.environ.get("SKILL_EVAL_REVIEWER", "").strip()
    if name:
        return name[:200]
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


LabelledAnswers = tuple[list[HumanLabel], dict[tuple[str, int], dict[str, bool]], dict[tuple[str, int], str]]
"""The run's labels; (shard, assertion) -> each judge's answer; (shard, assertion) -> its scope."""


def labelled_answers(
    store: ArtifactStore, run_id: str, cases: Mapping[str, tuple[str, int]] | None = None
) -> LabelledAnswers:
    """What :func:`reducer.agreement.agreement` weighs each judge against the people with.

    The judges' answers are read from the labelled shards' stored grades only; ``cases`` (shard
    -> (skill, case id)) names each assertion's scope, which otherwise is its text alone.
    """
    labels = load_labels(store, run_id)
    if not labels:
        return [], {}, {}
    shards = sorted({x.shard_id for x in labels})
    raw = store.get_many([grade_key(run_id, s) for s in shards])
    answers: dict[tuple[str, int], dict[str, bool]] = {}
    scopes: dict[tuple[str, int], str] = {}
    for shard in shards:
        blob = raw.get(grade_key(run_id, shard))
        if blob is None:
            continue
        grade = ShardGrade.model_validate_json(blob)
        for judge in grade.judges:
            for i, v in enumerate(judge.verdicts):
                if v.check == "judge":
                    answers.setdefault((shard, i), {})[judge.judge] = v.passed
        for i, v in enumerate(grade.verdicts):
            where = f"{cases[shard][0]} case {cases[shard][1]} " if cases and shard in cases else ""
            scopes[(shard, i)] = f"{where}#{i + 1}: {v.text}"
    return labels, answers, scopes


def judge_answer(grade: ShardGrade, assertion: int, judge: str) -> AssertionVerdict:
    """What ``judge`` (or the combined verdict) said of assertion ``assertion`` (0-based); a
    :class:`ConfigError` naming what is missing when it said nothing."""
    if judge == COMBINED:
        verdicts = grade.verdicts
    else:
        answers = [j for j in grade.judges if j.judge == judge]
        if not answers:
            raise ConfigError(f"shard {grade.shard_id}: no answer of judge {judge!r}")
        verdicts = answers[0].verdicts
    if not 0 <= assertion < len(verdicts):
        raise ConfigError(f"shard {grade.shard_id}: no assertion {assertion + 1} (it has {len(verdicts)})")
    return verdicts[assertion]


def nothing_to_label(store: ArtifactStore, run_id: str, shard_id: str) -> str:
    """Why a shard without a stored grade holds no judge's verdict to label, in words that are true
    of it: a trigger run's shard (graded by what fired, never by a judge), one that never got
    graded (blocked, an infra failure), one that has not ended, or no shard of the run at all."""
    where = f"run {run_id}: shard {shard_id}"
    plan = load_manifest(store, run_id).plan
    spec = next((s for s in plan.shards if s.shard_id == shard_id), None)
    if spec is None:
        return f"{where}: no such shard in the run"
    raw = store.get_many([outcome_key(run_id, shard_id)]).get(outcome_key(run_id, shard_id))
    if raw is None:
        return f"{where} has not ended yet: no verdict to label"
    outcome = ShardOutcomeRecord.model_validate_json(raw)
    if outcome.state is not ShardState.GRADED:
        why = f" ({outcome.detail})" if outcome.detail else ""
        return f"{where} ended {outcome.state.value}{why} and was never graded: no verdict to label"
    if any(b.skill == spec.skill and b.triggers is not None for b in plan.bundles):
        return f"{where}: a trigger run's shard has no judge verdicts to label (it is scored by what fired)"
    return f"{where} has no grade in {store.uri}"


def check_calibration_runs(store: ArtifactStore, run_ids: list[str]) -> tuple[str, ...]:
    """``run --calibrate-with``: each run must hold labelled verdicts; a :class:`ConfigError` naming
    the one that does not."""
    for run_id in run_ids:
        if not store.list(labels_prefix(run_id)):
            raise ConfigError(
                f"--calibrate-with {run_id}: no labelled verdict in {store.uri} "
                "(label some with skill-eval label or skill-eval view --review)"
            )
    return tuple(run_ids)


def new_label(
    store: ArtifactStore, run_id: str, shard_id: str, number: int, judge: str, agree: bool, note: str, reviewer: str
) -> HumanLabel:
    """The label of assertion ``number`` (counted from 1) of a shard, with the judge's answer read
    from the stored grade (never taken from whoever labels); a ``ConfigError`` naming what is missing,
    or why the verdict is not a judge's to label."""
    if not RECORD_ID.fullmatch(shard_id):
        raise ConfigError(f"run {run_id}: no shard {shard_id!r}: not a shard id")
    raw = store.get_many([grade_key(run_id, shard_id)]).get(grade_key(run_id, shard_id))
    if raw is None:
        raise ConfigError(nothing_to_label(store, run_id, shard_id))
    grade = ShardGrade.model_validate_json(raw)
    index = number - 1
    verdict = judge_answer(grade, index, judge)
    if verdict.check != "judge":
        # Agreement weighs judges against people; a check without a model has no judge to weigh.
        raise ConfigError(
            f"run {run_id}: shard {shard_id}: assertion {number} was decided by a {verdict.check} check, "
            "not a judge: only a judge's verdicts are labelled"
        )
    passed = verdict.passed
    return HumanLabel(
        run_id=run_id,
        shard_id=shard_id,
        assertion=index,
        assertion_text=grade.verdicts[index].text if index < len(grade.verdicts) else "",
        judge=judge,
        judge_passed=passed,
        agree=agree,
        note=note,
        reviewer=reviewer or reviewer_name(),
    )
