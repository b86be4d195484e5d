"""A run's threshold and each corpus's verdict against it. Pure.

A conclusive corpus passes only when its behavioural pass rate reaches the threshold: 1.0
(every graded assertion) unless ``--fail-under`` lowers it. A Claude Code plugin eval suite is
judged as ``plugin eval`` judges it: it passes only when every case's score (per executor model)
reaches the case threshold, which is ``--threshold`` when given and the run's threshold
otherwise. A baseline arm gets no verdict: no threshold applies to it, and nothing may read as
its PASS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from schemas.constants import DEFAULT_THRESHOLD
from schemas.report import RunResult, SkillResult
from schemas.shard import CURRENT


def case_scores(s: SkillResult) -> list[float]:
    """A plugin eval suite's scored cases, every executor model's (rounded: summation order must not decide)."""
    return [round(c.score, 12) for m in s.plugin_scores for c in m.cases if c.score is not None]


def corpus_verdict(s: SkillResult, threshold: float, plugin_threshold: float | None = None) -> str:
    """One current-arm corpus against the threshold: PASS only when its rate (a plugin eval
    suite: its every case's score, against ``plugin_threshold`` when given) reaches it."""
    if s.inconclusive:
        return "INCONCLUSIVE"
    if s.plugin_scores:
        scores = case_scores(s)
        if not scores:
            return "NOT GRADED"
        return "PASS" if min(scores) >= (threshold if plugin_threshold is None else plugin_threshold) else "FAIL"
    if s.behavioural.rate is None:
        return "NOT GRADED"
    return "PASS" if s.behavioural.rate >= threshold else "FAIL"


def with_verdicts(
    skills: Sequence[SkillResult], threshold: float, plugin_threshold: float | None = None
) -> list[SkillResult]:
    """The corpora with the current arm's verdict against ``threshold`` filled in."""
    return [
        s.model_copy(update={"verdict": corpus_verdict(s, threshold, plugin_threshold)}) if s.variant == CURRENT else s
        for s in skills
    ]


def case_threshold_label(threshold: float, source: str, plugin_threshold: float | None) -> str:
    """What a plugin eval case must score: ``--threshold 0.7``, or ``the threshold 1.0 (default)``."""
    return f"the threshold {threshold} ({source})" if plugin_threshold is None else f"--threshold {plugin_threshold:g}"


def threshold_of(fail_under: float | None) -> tuple[float, Literal["default", "--fail-under"]]:
    """The threshold a run applies and where it came from (``--fail-under`` or the strict default)."""
    return (DEFAULT_THRESHOLD, "default") if fail_under is None else (fail_under, "--fail-under")


def case_bar(result: RunResult) -> str:
    """What a plugin eval case of ``result`` must score: ``--threshold`` when set, else the run's threshold."""
    return case_threshold_label(result.threshold, result.threshold_source, result.plugin_threshold)
