"""A run's threshold and each corpus's verdict against it. Pure.

A conclusive corpus passes only when its behavioural pass rate reaches the threshold: 1.0
(every graded assertion) unless ``--fail-under`` lowers it. A baseline arm gets no verdict:
no threshold applies to it, and nothing may read as its PASS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from schemas.constants import DEFAULT_THRESHOLD
from schemas.report import SkillResult
from schemas.shard import CURRENT


def corpus_verdict(s: SkillResult, threshold: float) -> str:
    """One current-arm corpus against the threshold: PASS only when its rate reaches it."""
    if s.inconclusive:
        return "INCONCLUSIVE"
    if s.behavioural.rate is None:
        return "NOT GRADED"
    return "PASS" if s.behavioural.rate >= threshold else "FAIL"


def with_verdicts(skills: Sequence[SkillResult], threshold: float) -> list[SkillResult]:
    """The corpora with the current arm's verdict against ``threshold`` filled in."""
    return [
        s.model_copy(update={"verdict": corpus_verdict(s, threshold)}) if s.variant == CURRENT else s for s in skills
    ]


def threshold_of(fail_under: float | None) -> tuple[float, Literal["default", "--fail-under"]]:
    """The threshold a run applies and where it came from (``--fail-under`` or the strict default)."""
    return (DEFAULT_THRESHOLD, "default") if fail_under is None else (fail_under, "--fail-under")
