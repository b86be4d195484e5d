"""Judge calibration: grade built-in trajectories whose verdicts are known before a batch.

Two cases ship in ``testkit/calibration/``: a clean run where every assertion holds, and a
tempting bad run where none does although the agent claims otherwise in prose and a tool
result carries a forged closing tag, a "SYSTEM NOTICE" override and a ready-made all-pass
verdict array. A judge that does not reproduce every known verdict (or cannot grade them)
is reported; the reducer caps that run's verdict at WARN. Each case file is::

    {"name", "about", "skill", "assertions": [str], "expected": [bool], "trajectory": Trajectory}

``judge-rules.json`` beside them holds the offline server's scripted-judge rules that decide
these assertions correctly, for scenarios that must calibrate (the demo, tests).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import structlog

from engine.store import ArtifactStore
from schemas.status import ShardState
from schemas.trajectory import Trajectory
from worker.grading.fanout import fan_out
from worker.grading.judge import grade_trajectory
from worker.models.base import ModelClient

CALIBRATION_CASES = ("good-run", "tempting-bad-run")
log = structlog.get_logger("skill_eval.worker")


@dataclass(frozen=True)
class CalibrationCase:
    """A built-in trajectory with the verdicts a sound judge gives it."""

    name: str
    skill: str
    assertions: tuple[str, ...]
    expected: tuple[bool, ...]
    trajectory: Trajectory
    numbers: tuple[int, ...] = ()
    """Each assertion's number in its case, counted from 1 as the reports count them (a labelled
    shard brings only its labelled assertions); empty: 1, 2, ... in order."""


@dataclass(frozen=True)
class CalibrationResult:
    """Whether ``judge`` reproduced every known verdict; ``details`` names each miss."""

    judge: str
    ok: bool
    details: tuple[str, ...]


def _calibration_dir() -> Any:
    return resources.files("testkit").joinpath("calibration")


def load_case(name: str) -> CalibrationCase:
    """Load ``testkit/calibration/<name>.json``; raise ValueError when it is inconsistent."""
    data = json.loads(_calibration_dir().joinpath(f"{name}.json").read_text(encoding="utf-8"))
    case = CalibrationCase(
        name=data["name"],
        skill=data["skill"],
        assertions=tuple(data["assertions"]),
        expected=tuple(data["expected"]),
        trajectory=Trajectory.model_validate(data["trajectory"]),
    )
    if len(case.assertions) != len(case.expected):
        raise ValueError(f"calibration case {name}: {len(case.assertions)} assertions, {len(case.expected)} verdicts")
    return case


def labelled_cases(store: ArtifactStore, run_ids: Sequence[str]) -> list[CalibrationCase]:
    """One case per labelled shard of ``run_ids``: its stored trajectory, its labelled assertions,
    and the people's verdicts on them (the newest label of each); a shard without a stored
    trajectory is left out."""
    from engine.collect import load_trajectory
    from engine.labels import load_labels
    from reducer.agreement import human_truth

    cases = []
    for run_id in run_ids:
        labels = load_labels(store, run_id)
        texts = {(x.shard_id, x.assertion): x.assertion_text for x in labels}
        by_shard: dict[str, list[tuple[int, bool]]] = {}
        for (shard_id, index), passed in sorted(human_truth(labels).items()):
            by_shard.setdefault(shard_id, []).append((index, passed))
        for shard_id, verdicts in by_shard.items():
            trajectory = load_trajectory(store, run_id, shard_id)
            if trajectory is None or not all(texts[(shard_id, i)] for i, _ in verdicts):
                continue
            cases.append(
                CalibrationCase(
                    name=f"labelled {run_id}/{shard_id}",
                    skill=trajectory.skill,
                    assertions=tuple(texts[(shard_id, i)] for i, _ in verdicts),
                    expected=tuple(p for _, p in verdicts),
                    trajectory=trajectory,
                    numbers=tuple(i + 1 for i, _ in verdicts),
                )
            )
    return cases


def calibrate(
    client: ModelClient,
    judge: str,
    *,
    cases: tuple[str, ...] = CALIBRATION_CASES,
    labelled: Sequence[CalibrationCase] = (),
) -> CalibrationResult:
    """Grade every built-in case with ``judge`` alone and compare with the known verdicts.

    The cases are independent judge calls, so they go out together, one thread each: a run's
    first grades wait for its calibration, which then costs one call's latency, not one per case.
    Never raises for the judge's failures: an ungraded case (malformed, no answer) is a miss.
    """
    loaded = [load_case(name) for name in cases] + list(labelled)
    grades = fan_out(
        lambda c: grade_trajectory(client, [judge], c.assertions, c.trajectory, skill=c.skill),
        loaded,
        name="calibrate-case",
    )
    details: list[str] = []
    for case, grade in zip(loaded, grades, strict=True):
        name = case.name
        if grade.state is not ShardState.GRADED:
            details.append(f"{name}: {grade.state.value}: {grade.error}")
            continue
        numbers = case.numbers or range(1, len(case.expected) + 1)
        for n, verdict, expected in zip(numbers, grade.verdicts, case.expected, strict=True):
            if verdict.passed is not expected:
                got, want = ("pass", "fail") if verdict.passed else ("fail", "pass")
                details.append(f"{name}: assertion {n} ({verdict.text!r}) judged {got}, expected {want}")
    return CalibrationResult(judge=judge, ok=not details, details=tuple(details))


_background: dict[tuple[str, str], threading.Event] = {}
"""(run, judge) -> the event set when this process's background calibration of it ends; only
while it runs."""
_background_lock = threading.Lock()


def calibrate_in_background(run_id: str, judges: Sequence[str], calibrate_one: Callable[[str], None]) -> None:
    """Calibrate ``judges`` for ``run_id`` in a daemon thread, one after the other.

    ``calibrate_one(judge)`` takes the run's calibration lock and stores the record (see
    ``worker/pipeline.py: ensure_calibrated``). The judges are registered before this returns,
    so a grade task of this process that starts later waits for them
    (:func:`wait_for_background`): the contract's order, calibrated before the batch is
    graded, holds while the shards' execution overlaps the calibration calls.
    """
    events = []
    with _background_lock:
        for judge in judges:
            if (run_id, judge) not in _background:
                _background[(run_id, judge)] = threading.Event()
                events.append((judge, _background[(run_id, judge)]))

    def run() -> None:
        for judge, done in events:
            try:
                calibrate_one(judge)
            except Exception as exc:  # a grade task then calibrates inline (or the report says "not calibrated")
                log.warning("background calibration failed", run_id=run_id, judge=judge, error=str(exc))
            finally:
                with _background_lock:
                    _background.pop((run_id, judge), None)  # later graders find the stored record
                done.set()

    if events:
        threading.Thread(target=run, name=f"calibrate-{run_id}", daemon=True).start()


def wait_for_background(run_id: str, judge: str, poll_s: float = 0.25) -> None:
    """Return once this process's background calibration of ``judge`` ended; at once when there is none.

    Waits in short slices so a shard's soft deadline (an exception raised into this thread)
    still lands.
    """
    with _background_lock:
        done = _background.get((run_id, judge))
    while done is not None and not done.wait(poll_s):
        pass
