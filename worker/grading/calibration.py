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
from dataclasses import dataclass
from importlib import resources
from typing import Any

from schemas.status import ShardState
from schemas.trajectory import Trajectory
from worker.grading.judge import grade_trajectory
from worker.models.base import ModelClient

CALIBRATION_CASES = ("good-run", "tempting-bad-run")


@dataclass(frozen=True)
class CalibrationCase:
    """A built-in trajectory with the verdicts a sound judge gives it."""

    name: str
    skill: str
    assertions: tuple[str, ...]
    expected: tuple[bool, ...]
    trajectory: Trajectory


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


def calibrate(client: ModelClient, judge: str, *, cases: tuple[str, ...] = CALIBRATION_CASES) -> CalibrationResult:
    """Grade every built-in case with ``judge`` alone and compare with the known verdicts.

    Never raises for the judge's failures: an ungraded case (malformed, no answer) is a miss.
    """
    details: list[str] = []
    for name in cases:
        case = load_case(name)
        grade = grade_trajectory(client, [judge], case.assertions, case.trajectory, skill=case.skill)
        if grade.state is not ShardState.GRADED:
            details.append(f"{name}: {grade.state.value}: {grade.error}")
            continue
        for i, (verdict, expected) in enumerate(zip(grade.verdicts, case.expected, strict=True)):
            if verdict.passed is not expected:
                got, want = ("pass", "fail") if verdict.passed else ("fail", "pass")
                details.append(f"{name}: assertion {i} ({verdict.text!r}) judged {got}, expected {want}")
    return CalibrationResult(judge=judge, ok=not details, details=tuple(details))
