"""The rules a reduce applies: rates, infra headlines, the INCONCLUSIVE gates, composite scores and the verdict. Pure.

The reduce itself, which counts a run's shards and applies these, is :mod:`reducer.stream`.

The behavioural pass rate counts graded shards only; infra failures are tallied apart by
kind; blocked shards are listed apart; a corpus is INCONCLUSIVE when more than
``INCONCLUSIVE_CASE_SHARE`` (25%) of its shards are not graded, or any is not graded in a
corpus of fewer than ``SMALL_CORPUS_CASES`` (4) cases; several corpora are INCONCLUSIVE
together when more than ``AGGREGATE_INCONCLUSIVE_SHARE`` (10%) of them are (the constants
are in :mod:`schemas.constants`; every message says them from there). A conclusive corpus passes
only when its behavioural pass rate reaches the run's threshold: 1.0 (every assertion) unless
``--fail-under`` lowers it.

The gate counts shards, not cases: with several models or epochs one case is run (and may
fail to be graded) once per model and epoch, and each of those runs is one shard, so a
corpus of 4 cases x 2 models x 3 epochs has 24 shards and turns INCONCLUSIVE past 6 of them
not graded. The headline says "shards" for that reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reducer.plugin_score import below_threshold
from reducer.stats import clustered_interval, pass_at_k, pass_hat_k, wilson
from reducer.threshold import case_threshold_label, corpus_verdict, gated_kinds, threshold_of
from schemas.constants import AGGREGATE_INCONCLUSIVE_SHARE, INCONCLUSIVE_CASE_SHARE, SMALL_CORPUS_CASES
from schemas.outcome import CalibrationRecord, CalibrationStatus
from schemas.report import UNFINISHED, AssertionStat, CarriedReport, ClusteredRate, ModelSummary, Rate, SkillResult
from schemas.shard import CURRENT
from schemas.status import Verdict
from schemas.words import plural

NO_RECORD = f"no terminal record in the store: {UNFINISHED}"
"""The detail of a shard the reduce found no outcome for."""


def partial(s: SkillResult) -> str:
    """Why a corpus with shards not yet ended (or lost) cannot pass: the report holds only what ended."""
    return f"{s.unfinished}/{s.shard_count} shards not graded, {UNFINISHED} (a partial result)"


def rate(passed: int, total: int, clusters: Sequence[tuple[int, int]] = ()) -> Rate:
    """``passed/total`` with its Wilson interval, and, when ``clusters`` (passed, trials per case)
    show several trials in one case, the interval with the case as the unit."""
    low, high = wilson(passed, total)
    clustered = None
    if any(m > 1 for _, m in clusters):
        found = clustered_interval(clusters)
        if found is not None:
            clustered = ClusteredRate(
                clusters=found.clusters, low=found.low, high=found.high, design_effect=found.design_effect
            )
    return Rate(
        passed=passed, total=total, rate=(passed / total if total else None), low=low, high=high, clustered=clustered
    )


def headline(r: Rate) -> str:
    """``passed/graded (percent)``, e.g. ``4/7 (57.1%)``; with unequal epochs the case-weighted
    percent first (it is not ``passed/total``: each case is rated by its first round and weighs
    once), then the raw verdict counts, said to be all of them."""
    pct = 100.0 * r.rate if r.rate is not None else 0.0
    if r.weighted is not None:
        how = "each case rated by its first round and weighted equally"
        return f"{pct:.1f}% ({how}; {r.passed}/{r.total} verdicts in all)"
    return f"{r.passed}/{r.total} ({pct:.1f}%)"


def _count(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def counts(r: Rate) -> str:
    """What a rate and its Wilson interval are of: ``12/18 (66.7%)``, or with unequal epochs the
    case-weighted counts and then the raw verdicts (``4.25/6 case-weighted (70.8%; 14/22 verdicts)``)."""
    pct = f"{100.0 * r.rate:.1f}%" if r.rate is not None else "-"
    if r.weighted is None:
        return f"{r.passed}/{r.total} ({pct})"
    passed, total = r.weighted
    return f"{_count(passed)}/{_count(total)} case-weighted ({pct}; {r.passed}/{r.total} verdicts)"


def tally(r: Rate) -> str:
    """What a rate is the ratio of, without its percent: ``12/18``, or with unequal epochs the
    case-weighted counts and the raw verdicts (``4.25/6 case-weighted, 14/22 verdicts``)."""
    if r.weighted is None:
        return f"{r.passed}/{r.total}"
    passed, total = r.weighted
    return f"{_count(passed)}/{_count(total)} case-weighted, {r.passed}/{r.total} verdicts"


def interval_method(r: Rate) -> str:
    """How a rate's ``low``-``high`` interval was computed, for the reports."""
    if r.weighted is None:
        return "Wilson"
    return "Wilson on the case-weighted counts, each case weighted as one shard and rated by its first round"


def inconclusive_headline(not_graded: int, shards: int, infra: int, blocked: int) -> str:
    """The contract's ``INCONCLUSIVE (<n>/<shards> shards not graded — infra)`` when every shard not
    graded was an infra failure; otherwise the kinds, adding up to ``n`` (``— 2 blocked``,
    ``— 1 infra, 1 blocked, 1 not finished``), so the headline agrees with the tallies beside it."""
    kinds = [(infra, "infra"), (blocked, "blocked"), (not_graded - infra - blocked, "not finished")]
    said = "infra" if infra == not_graded else ", ".join(f"{n} {kind}" for n, kind in kinds if n > 0)
    return f"INCONCLUSIVE ({not_graded}/{shards} shards not graded — {said})"


def is_inconclusive(not_graded: int, shards: int, cases: int) -> bool:
    """The trustworthiness gate of one corpus: ``not_graded`` of its ``shards`` (case x model x
    epoch runs), and its number of distinct ``cases`` for the small-corpus rule."""
    if shards == 0 or not_graded == 0:
        return False
    return not_graded / shards > INCONCLUSIVE_CASE_SHARE or cases < SMALL_CORPUS_CASES


def composite(passed: Sequence[bool], weights: Sequence[float] = ()) -> float:
    """Weighted share of assertions passed, judged and deterministic alike (weight 1 unless given)."""
    weights = weights or [1.0] * len(passed)
    total = sum(weights)
    return sum(w for w, p in zip(weights, passed, strict=True) if p) / total if total else 0.0


def assertion_stat(
    case_id: int, index: int, text: str, counts: Mapping[str, tuple[int, int]], epochs: int
) -> AssertionStat:
    """One assertion's row of the matrix from (passed, observed) per model; pass@k and pass^k with
    k = the epochs (or fewer observations), averaged over the models that have any."""
    at_k: list[float] = []
    hat_k: list[float] = []
    for c, n in counts.values():
        if n:
            k = min(epochs, n)
            at_k.append(pass_at_k(n, c, k))
            hat_k.append(pass_hat_k(n, c, k))
    return AssertionStat(
        case_id=case_id,
        index=index,
        text=text,
        by_model={model: rate(c, n) for model, (c, n) in counts.items()},
        pass_at_k=sum(at_k) / len(at_k) if at_k else None,
        pass_hat_k=sum(hat_k) / len(hat_k) if hat_k else None,
    )


def aggregate_gate(
    current: Sequence[SkillResult], rated: bool = True, weighted: Rate | None = None
) -> tuple[bool, str]:
    """Whether several corpora are INCONCLUSIVE together, and the AGGREGATE line (empty for one
    corpus, and when it would be a suite pass rate but the corpora hold no assertions: not ``rated``,
    a trigger run). ``weighted``: the trustworthy corpora's case-weighted rate, the suite's figure
    when any of them weighted its cases over unequal epochs."""
    inconclusive = [s for s in current if s.inconclusive]
    aggregate = len(current) > 1 and len(inconclusive) / len(current) > AGGREGATE_INCONCLUSIVE_SHARE
    if aggregate:
        return aggregate, f"AGGREGATE: INCONCLUSIVE ({len(inconclusive)}/{len(current)} corpora not trustworthy)"
    if len(current) < 2 or not rated:
        return aggregate, ""
    # The suite rate sums trustworthy corpora only: an INCONCLUSIVE corpus's few graded cases are noise.
    trusted = [s for s in current if not s.inconclusive]
    suite = suite_rate([s.behavioural for s in trusted], weighted)
    left_out = f" ({len(inconclusive)} INCONCLUSIVE corpus left out)" if inconclusive else ""
    return aggregate, f"AGGREGATE: {headline(suite)}{left_out}"


def suite_rate(rates: Sequence[Rate], weighted: Rate | None = None) -> Rate:
    """Several corpora's rates summed: their verdicts pooled, or, when any corpus weighted its cases
    over unequal epochs, ``weighted`` (every case of them weighted once, as that corpus's own rate is,
    so a corpus of equal epochs does not count each case once per epoch beside it)."""
    if weighted is not None and any(r.weighted is not None for r in rates):
        return weighted
    return rate(sum(r.passed for r in rates), sum(r.total for r in rates))


def rank(board: Sequence[ModelSummary]) -> list[ModelSummary]:
    """Best composite first, ties by name; means equal to 12 places are ties (summation order
    must not decide a rank)."""
    return sorted(board, key=lambda m: (m.composite_mean is None, -round(m.composite_mean or 0.0, 12), m.model))


def _threshold_failures(
    current: Sequence[SkillResult], threshold: float, source: str, plugin_threshold: float | None
) -> list[str]:
    """One reason per corpus below its threshold; a plugin eval suite's, one per case below it."""
    label = case_threshold_label(threshold, source, plugin_threshold)
    bar = threshold if plugin_threshold is None else plugin_threshold
    fails = []
    for s in current:
        if corpus_verdict(s, threshold, plugin_threshold) != "FAIL":
            continue
        rate_line = f"behavioural pass rate {headline(s.behavioural)} is below the threshold {threshold} ({source})"
        fails += below_threshold(s, bar, label) if s.plugin_scores else [f"{s.skill}: {rate_line}"]
    return fails


def decide_verdict(
    current: Sequence[SkillResult],
    all_skills: Sequence[SkillResult],
    aggregate_inconclusive: bool,
    calibration: Mapping[str, CalibrationRecord],
    fail_under: float | None,
    skipped: Sequence[str],
    already_reported: Sequence[CarriedReport] = (),
    comparison_fails: Sequence[str] = (),
    comparison_warns: Sequence[str] = (),
    plugin_threshold: float | None = None,
    pass_tail: str = "",
) -> tuple[Verdict, list[str]]:
    """BLOCKED > FAIL > WARN > PASS, with every reason that applies.

    A conclusive corpus whose behavioural pass rate is below the threshold (``fail_under``, or
    the default 1.0 when None) fails the run; a plugin eval suite fails it when a case scores
    below ``plugin_threshold`` (``--threshold``), or below that threshold when None.

    A corpus ``--all-evals`` left out for its earlier report (``already_reported``) carries that
    report's verdict: a carried FAIL fails the run, a carried WARN warns, each named in the reasons.
    A run with nothing to do because every valid corpus already has a report is not BLOCKED:
    those corpora were evaluated before, and their verdicts decide it.
    ``pass_tail``: what a PASS's reason adds for the comparisons (:func:`reducer.gates.pass_tail`).
    """
    # Run-stopping case statuses (NO_ISOLATION -> BLOCKED; a base fixture without git
    # halts the skill; a worker refusing an unsandboxed shard). Only the current version counts:
    # a baseline that cannot be isolated degrades the comparison, it does not stop the run.
    blocked = [f"{s.skill} case {r.case_id}: {r.detail}" for s in current for r in s.blocked if r.stops_run]
    if blocked or (skipped and not current and not already_reported):
        return Verdict.BLOCKED, blocked or ["every corpus was skipped"]
    unavailable = {s.skill for s in all_skills if s.variant != CURRENT and s.blocked and s.behavioural.total == 0}
    threshold, source = threshold_of(fail_under)
    fails = _threshold_failures(current, threshold, source, plugin_threshold)
    # Regressions and uplift are decided on the paired figures (reducer.gates).
    fails += comparison_fails
    fails += [c.reason() for c in already_reported if c.verdict == "FAIL"]
    if fails:
        return Verdict.FAIL, fails
    warns = [f"{s.skill} ({s.variant}): {s.headline}" for s in all_skills if s.inconclusive]
    # An INCONCLUSIVE headline already counts the shards not finished: the partial result is said once.
    warns += [f"{s.skill} ({s.variant}): {partial(s)}" for s in all_skills if s.unfinished and not s.inconclusive]
    if aggregate_inconclusive:
        warns.append(f"more than {AGGREGATE_INCONCLUSIVE_SHARE:.0%} of corpora are INCONCLUSIVE")
    warns += [
        f"judge {j} failed calibration: {'; '.join(c.details)}"
        for j, c in calibration.items()
        if c.status is CalibrationStatus.FAILED
    ]
    warns += [
        f"judge {j} was not calibrated: no calibration result was recorded"
        for j, c in calibration.items()
        if c.status is CalibrationStatus.MISSING
    ]
    warns += [f"skipped {s}" for s in skipped]
    warns += [f"{s.skill} ({s.variant}) case {r.case_id} blocked: {r.detail}" for s in all_skills for r in s.blocked]
    warns += [f"{skill}: baseline unavailable, no comparison" for skill in sorted(unavailable)]
    warns += comparison_warns
    warns += [c.reason() for c in already_reported if c.verdict == "WARN"]
    if warns:
        return Verdict.WARN, warns
    carried = [c.reason() for c in already_reported]
    if not current and carried:
        return Verdict.PASS, [f"nothing to run: {plural(len(carried), 'corpus')} already reported", *carried]
    return Verdict.PASS, [_passed(current, threshold, source, plugin_threshold) + pass_tail, *carried]


def _passed(current: Sequence[SkillResult], threshold: float, source: str, plugin_threshold: float | None) -> str:
    """A PASS's reason, naming each threshold only for the corpora it decided: a plugin eval suite
    by its case scores (its pass rate decides nothing), every other corpus by its pass rate. It
    says what a regression test found only after one that could have found one (the caller's tail)."""
    ordinary, plugin = gated_kinds(current)
    graded = _graded(current)
    if not plugin:
        return f"{graded} and at or above the threshold {threshold} ({source})"
    cases = f"every plugin eval case's score at or above {case_threshold_label(threshold, source, plugin_threshold)}"
    rates = f" and every other corpus's pass rate at or above the threshold {threshold} ({source})" if ordinary else ""
    return f"{graded}; {cases}{rates}"


def _graded(current: Sequence[SkillResult]) -> str:
    """ "all corpora graded" only when every shard was: a corpus may miss up to a quarter of its shards
    (a whole case among four) and still be conclusive, and a PASS then says how many it missed."""
    missing = sum(s.not_graded for s in current)
    if not missing:
        return "all corpora graded"
    total = sum(s.shard_count for s in current)
    return f"every corpus conclusive ({missing} of {plural(total, 'shard')} not graded)"
