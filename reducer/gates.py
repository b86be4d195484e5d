"""Which paired comparisons fail a run: regressions against an old ref, missing uplift over no skill. Pure.

- Against ``baseline@<ref>`` without ``regression_alpha``: any drop of the paired pass rate
  is a regression (the contract's rule). With it, only a significant one-sided drop is:
  the overall test or any single assertion, Holm-adjusted over one family holding every
  compared corpus's tests, below alpha (assertions with fewer pairs than an exact one-sided
  test needs to reach alpha are not in the family).
  When the overall test cannot reach alpha with this many cases (the smallest one-sided p an
  exact paired test over ``n`` cases can give is ``2^-n``, every case changed the same way),
  the gate cannot fire on the overall figure: :func:`comparison_warnings` makes that a WARN,
  never a silent "no regression".
- Against ``no-skill`` with ``require_uplift`` (a margin, 0 by default): the lower bound of
  the uplift's 95% interval must be above the margin, and the exact one-sided sign-flip test
  of the per-case differences minus the margin must reject at 2.5% (the interval is a
  large-sample score interval: the exact test decides at a handful of cases). Else FAIL.
  Without it the with/without figures decide nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from reducer.html_parts import ci
from reducer.paired import MIN_INTERVAL_CASES, UPLIFT_TEST_ALPHA, holm, sign_flip_test
from reducer.sensitivity import sensitivity_warnings
from schemas.comparison import PairedComparison
from schemas.report import SkillResult


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f} pts"


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def smallest_p(cases: int) -> float:
    """Smallest one-sided p an exact paired test (McNemar's or the sign-flip test) over ``cases``
    cases can give: every case changed, all the same way, is one sign pattern of ``2^cases``."""
    return 0.5**cases


def regression_untestable(c: PairedComparison, alpha: float | None) -> bool:
    """Whether ``--regression-alpha`` can never fire on this comparison's overall test."""
    paired = c.test not in ("two-proportion-z", "none") and c.difference is not None
    return alpha is not None and c.kind == "compare" and paired and smallest_p(c.cases) >= alpha


def regression_tested(comparisons: Sequence[PairedComparison], alpha: float | None) -> str:
    """What a PASS may say of the regression gate: empty unless a comparison against an old ref
    ran and its gate could fire; then what was tested (``no significant regression (one-sided
    p = 0.125 >= alpha 0.05)``, or without alpha ``no drop against baseline@REF``)."""
    compared = [c for c in comparisons if c.kind == "compare" and c.model is None]
    if not compared or any(c.difference is None or regression_untestable(c, alpha) for c in compared):
        return ""
    if alpha is None:
        return "no drop against " + ", ".join(dict.fromkeys(c.baseline for c in compared))
    # A p below alpha that did not fail the run was not significant after Holm's adjustment.
    said = [
        f"one-sided p = {_p(c.p_drop)} >= alpha {alpha:g}"
        if _drop(c) >= alpha
        else f"one-sided p = {_p(c.p_drop)}, not below alpha {alpha:g} after Holm's adjustment"
        for c in compared
    ]
    return f"no significant regression ({'; '.join(dict.fromkeys(said))})"


def pass_tail(comparisons: Sequence[PairedComparison], alpha: float | None, require_uplift: float | None) -> str:
    """What a PASS's reason adds for the comparisons: what the regression gate tested, only after a
    comparison against an old ref that could have found a regression (:func:`regression_tested`);
    that the uplift over no skill was not gated when it was measured without ``--require-uplift``
    (a PASS must not read as the skill having helped)."""
    tested = regression_tested(comparisons, alpha)
    tail = f"; {tested}" if tested else ""
    if require_uplift is None and any(c.kind == "no-skill" for c in comparisons):
        tail += "; uplift over no skill measured, not gated (--require-uplift)"
    return tail


def comparison_warnings(
    comparisons: Sequence[PairedComparison],
    skills: Sequence[SkillResult],
    regression_alpha: float | None,
    guards: Sequence[str] = (),
) -> list[str]:
    """The WARN reasons: a comparison asked for that a guard skipped (``<skill>: GUARD_...``), a
    regression test that too few cases could never pass, a suite that cannot tell the skill from
    its gutted copy (:mod:`reducer.sensitivity`)."""
    by_arm = {(s.skill, s.variant): s for s in skills}
    out = [f"comparison skipped: {g}" for g in guards]
    for c in comparisons:
        current, base = by_arm.get((c.skill, "current")), by_arm.get((c.skill, c.baseline))
        if c.model is not None or current is None or base is None or not regression_untestable(c, regression_alpha):
            continue
        if current.inconclusive or base.inconclusive:
            continue  # already a WARN of its own
        out.append(
            f"{c.skill}: too few cases to test for a regression at {regression_alpha:g} against {c.baseline}: "
            f"the smallest p {c.cases} cases can give is {_p(smallest_p(c.cases))} "
            f"(paired {_pct(c.difference)}, one-sided p = {_p(c.p_drop)})"
        )
    return out + sensitivity_warnings(comparisons)


def comparison_failures(
    comparisons: Sequence[PairedComparison],
    skills: Sequence[SkillResult],
    *,
    regression_alpha: float | None = None,
    require_uplift: float | None = None,
) -> list[str]:
    """The FAIL reasons the comparisons give (empty: none fails)."""
    by_arm = {(s.skill, s.variant): s for s in skills}
    fails: list[str] = []
    gated: list[tuple[PairedComparison, str]] = []  # against an old ref, with the head of its reason
    for c in (c for c in comparisons if c.model is None):
        current, base = by_arm.get((c.skill, "current")), by_arm.get((c.skill, c.baseline))
        if current is None or base is None:
            continue
        if c.kind in ("same", "gutted"):
            continue  # the noise floor and the suite's sensitivity are measured, never a FAIL
        if c.kind == "no-skill":
            if require_uplift is not None:
                fails += _uplift_failure(c, require_uplift)
            continue
        if current.inconclusive or base.inconclusive or (base.blocked and base.behavioural.total == 0):
            continue  # a WARN elsewhere: the comparison measured the infra, not the skill
        if c.difference is not None:
            gated.append((c, f"{c.skill}: regression {base.headline} -> {current.headline}"))
    return fails + _regressions(gated, regression_alpha)


def _uplift_failure(c: PairedComparison, margin: float) -> list[str]:
    if c.low is None:
        return [f"{c.skill}: no uplift shown over no skill (no paired graded cases; --require-uplift {margin:g})"]
    shown = f"{c.skill}: uplift over no skill {_pct(c.difference)} ({ci(c.low, c.high, c.cases)}"
    if c.low <= margin and c.cases >= MIN_INTERVAL_CASES:  # fewer: the exact test's reason below says why
        return [f"{shown}) has a lower bound not above the margin {_pct(margin)}"]
    if margin == 0 and c.p_uplift is not None and c.test != "two-proportion-z":
        p = c.p_uplift  # the comparison's own test is this test
    else:
        shifted = [_exact(d.current_rate) - _exact(d.baseline_rate) - _exact(margin) for d in c.per_case]
        p = sign_flip_test(shifted, seed=c.seed).uplift
    if p >= UPLIFT_TEST_ALPHA:
        return [
            f"{shown}): too few cases to show it above the margin {_pct(margin)} "
            f"(exact one-sided p = {_p(p)} over {c.cases} cases, needs < {UPLIFT_TEST_ALPHA:g})"
        ]
    return []


def _regressions(gated: Sequence[tuple[PairedComparison, str]], alpha: float | None) -> list[str]:
    """The regression reasons of every corpus compared against an old ref. With ``alpha``, Holm's
    adjustment runs over one family holding every corpus's overall test and testable assertions,
    so ``--all-evals`` over many corpora keeps the chance of any false FAIL at alpha."""
    if alpha is None:
        return [
            f"{head} ({c.baseline}; paired {_pct(c.difference)}, {ci(c.low, c.high, c.cases)}, "
            f"one-sided p = {_p(c.p_drop)})"
            for c, head in gated
            if c.difference is not None and c.difference < 0
        ]
    # An assertion with fewer pairs than the exact one-sided test needs can never reach alpha:
    # leaving it out of the family (decided by its pair count, never by its verdicts) keeps Holm
    # from diluting the tests that can.
    families = [[a for a in c.assertions if smallest_p(a.pairs) < alpha] for c, _ in gated]
    adjusted = holm([p for (c, _), f in zip(gated, families, strict=True) for p in [_drop(c), *(a.p_drop for a in f)]])
    across = f" over {len(adjusted)} tests in {len(gated)} corpora" if len(gated) > 1 else ""
    out, at = [], 0
    for (c, head), testable in zip(gated, families, strict=True):
        mine, at = adjusted[at : at + 1 + len(testable)], at + 1 + len(testable)
        if mine[0] < alpha:
            out.append(
                f"{head} ({c.baseline}; paired {_pct(c.difference)}, significant: one-sided p = {_p(c.p_drop)}, "
                f"Holm {_p(mine[0])} < {alpha:g}{across})"
            )
        out += [
            f"{head} ({c.baseline}; case {a.case_id} assertion {a.index + 1} dropped significantly: {a.worse} pairs "
            f"worse, {a.better} better, Holm-adjusted one-sided p = {_p(p)} < {alpha:g}{across})"
            for a, p in zip(testable, mine[1:], strict=True)
            if p < alpha
        ]
    return out


def _drop(c: PairedComparison) -> float:
    return c.p_drop if c.p_drop is not None else 1.0


def _exact(x: float) -> Fraction:
    # Rates are ratios of small counts stored as floats: recover the ratio, not the binary float.
    return Fraction(x).limit_denominator(1_000_000)
