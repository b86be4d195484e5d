"""A run's threshold and each corpus's verdict against it. Pure.

A conclusive corpus passes only when its behavioural pass rate reaches the threshold: 1.0
(every graded assertion) unless ``--fail-under`` lowers it. A Claude Code plugin eval suite is
judged as ``plugin eval`` judges it: it passes only when every case's score (per executor model)
reaches the case threshold, which is ``--threshold`` when given and the run's threshold
otherwise; its assertions' pass rate is reported and decides nothing, so no line about it
may name the pass-rate threshold. A baseline arm gets no verdict: no threshold applies to it,
and nothing may read as its PASS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from schemas.constants import DEFAULT_THRESHOLD
from schemas.report import PluginSuiteScore, RunResult, SkillResult, case_label
from schemas.shard import CURRENT


def is_plugin(s: SkillResult) -> bool:
    """A Claude Code plugin eval suite (the reduce scores every one): judged by its case scores, not its pass rate."""
    return bool(s.plugin_scores)


def case_scores(s: SkillResult) -> list[float]:
    """A plugin eval suite's scored cases, every executor model's (rounded: summation order must not decide)."""
    return [round(c.score, 12) for m in s.plugin_scores for c in m.cases if c.score is not None]


def corpus_verdict(s: SkillResult, threshold: float, plugin_threshold: float | None = None) -> str:
    """One current-arm corpus against the threshold: PASS only when its rate (a plugin eval
    suite: its every case's score, against ``plugin_threshold`` when given) reaches it."""
    if s.inconclusive:
        return "INCONCLUSIVE"
    if is_plugin(s):
        scores = case_scores(s)
        if not scores:
            return "NOT GRADED"
        return "PASS" if min(scores) >= (threshold if plugin_threshold is None else plugin_threshold) else "FAIL"
    if s.behavioural.rate is None:
        return "NOT GRADED"
    if s.behavioural.rate < threshold:
        return "FAIL"
    return "WARN" if s.unplanned else "PASS"  # a case never graded: what was graded cannot speak for it


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


CASES = "every plugin eval case's score"


def gated_kinds(skills: Sequence[SkillResult]) -> tuple[bool, bool]:
    """(any corpus gated by its pass rate, any plugin eval suite) among the current arm's corpora
    (every corpus when no current arm is there); neither only for a run with no corpus."""
    judged = [s for s in skills if s.variant == CURRENT] or list(skills)
    return any(not is_plugin(s) for s in judged), any(is_plugin(s) for s in judged)


UNGATED = "no corpus of this run is gated by its pass rate"


def threshold_applies_to(result: RunResult) -> list[str]:
    """What the run's threshold (``--fail-under`` or the default) gated: ``pass rates``, ``plugin eval
    case scores`` (when no ``--threshold`` takes its place), both, or nothing (a plugin eval suite
    with ``--threshold``, whose ordinary corpora were skipped or never there)."""
    ordinary, plugin = gated_kinds(result.skills)
    return ["pass rates"] * ordinary + ["plugin eval case scores"] * (plugin and result.plugin_threshold is None)


def plugin_bar(result: RunResult) -> float:
    """The score every plugin eval case must reach: ``--threshold``, else the run's threshold."""
    return result.threshold if result.plugin_threshold is None else result.plugin_threshold


def threshold_text(result: RunResult) -> str:
    """The run's thresholds and what each applies to, always starting with ``threshold``.

    ``threshold 1.0 (default)`` (no plugin eval suite); ``threshold 0.7 (--threshold) on every
    plugin eval case's score`` (only plugin eval suites: no pass-rate threshold is named, none
    applies); both, saying which is which, for a run that mixes them."""
    rate = f"threshold {result.threshold} ({result.threshold_source})"
    ordinary, plugin = gated_kinds(result.skills)
    if not plugin:
        return rate
    bar = None if result.plugin_threshold is None else f"{result.plugin_threshold:g} (--threshold)"
    if not ordinary:
        text = f"threshold {bar or rate.removeprefix('threshold ')} on {CASES}"
        if bar is not None and result.threshold_source != "default":  # given, yet gating no corpus here
            text += f"; {result.threshold} ({result.threshold_source}) on nothing: {UNGATED}"
        return text
    return f"{rate} on pass rates and on {CASES}" if bar is None else f"{rate} on pass rates; {bar} on {CASES}"


def suite_threshold(s: SkillResult, result: RunResult) -> str:
    """The one threshold that decides corpus ``s``: ``0.8 (--fail-under)`` on its pass rate, or
    ``0.7 (--threshold) on every plugin eval case's score``."""
    rate = f"{result.threshold} ({result.threshold_source})"
    if not is_plugin(s):
        return rate
    return f"{rate if result.plugin_threshold is None else f'{result.plugin_threshold:g} (--threshold)'} on {CASES}"


def rule_sentence(ordinary: bool, plugin: bool, threshold: float, source: str, plugin_threshold: float | None) -> str:
    """How a corpus passes, in one sentence, when a plugin eval suite is among the corpora ('' otherwise)."""
    if not plugin:
        return ""
    suites = (
        f"every case's score, per executor model, reaches {case_threshold_label(threshold, source, plugin_threshold)}"
    )
    if not ordinary:
        return f"A plugin eval suite passes when {suites}; its assertions' pass rate is reported and decides nothing."
    return (
        f"A corpus passes when its behavioural pass rate reaches the threshold {threshold} ({source}); "
        f"a plugin eval suite when {suites}, its pass rate deciding nothing."
    )


def gate_rule(result: RunResult) -> str:
    """:func:`rule_sentence` for ``result``."""
    ordinary, plugin = gated_kinds(result.skills)
    return rule_sentence(ordinary, plugin, result.threshold, result.threshold_source, result.plugin_threshold)


def score_against(score: float, bar: float) -> str:
    """``score`` to three places, or to as many as it takes not to read as on the other side of ``bar``
    (0.2996 below 0.3 is not "0.300 below 0.3")."""
    for places in (3, 6, 12):
        text = f"{score:.{places}f}"
        if (round(float(text), 12) >= bar) == (round(score, 12) >= bar):
            return text
    return repr(score)


def lowest_case(scores: Sequence[PluginSuiteScore]) -> tuple[float, int, str] | None:
    """The lowest scored case over every executor model: (score rounded as compared, case, model)."""
    scored = [(round(c.score, 12), c.case_id, m.model) for m in scores for c in m.cases if c.score is not None]
    return min(scored) if scored else None


def plugin_basis(
    scores: Sequence[PluginSuiteScore], bar: float, label: str, names: Mapping[int, str] | None = None
) -> str:
    """What decided a plugin eval suite: its lowest case score against ``bar`` (``label`` names it;
    ``names``: the cases' names, shown beside their numbers)."""
    lowest = lowest_case(scores)
    if lowest is None:
        return f"no plugin eval case scored; each must reach {label}"
    score, case_id, model = lowest
    where = f"lowest: {case_label(case_id, names)}, {score_against(score, bar)} with {model}"
    if score >= bar:
        return f"every plugin eval case at or above {label}; {where}"
    return f"a plugin eval case below {label}; {where}"


def verdict_basis(s: SkillResult, result: RunResult) -> str:
    """What decided a current-arm corpus's PASS or FAIL, in words ('' when nothing was judged)."""
    if s.verdict not in ("PASS", "FAIL"):
        return ""
    if is_plugin(s):
        return plugin_basis(s.plugin_scores, plugin_bar(result), case_bar(result), s.case_names)
    side = "at or above" if s.verdict == "PASS" else "below"
    return f"behavioural pass rate {s.headline} {side} the threshold {result.threshold} ({result.threshold_source})"
