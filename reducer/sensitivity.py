"""Suite sensitivity: can the suite tell the skill from its copy with the instructions removed? Pure.

With ``--baseline gutted`` the second arm runs the skill's name and description only, so it
still triggers but carries no instructions. The paired drop from the current arm to it is
what the suite can see of the skill's instructions. A suite that cannot show that drop
(the exact one-sided paired test over cases, at the level of a two-sided 95% interval) gets
the named warning :data:`schemas.constants.WARN_INSENSITIVE_SUITE`: its PASS would say
little about the skill. Per assertion, one that passes as often without the instructions
measures the model, not the skill.
"""

from __future__ import annotations

from collections.abc import Sequence

from reducer.html_parts import ci
from reducer.paired import UPLIFT_TEST_ALPHA
from schemas.comparison import AssertionComparison, PairedComparison
from schemas.constants import WARN_INSENSITIVE_SUITE


def _pts(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f} pts"


def insensitive_assertions(c: PairedComparison) -> list[AssertionComparison]:
    """The assertions of a gutted comparison that pass at least as often without the instructions."""
    return [
        a
        for a in c.assertions
        if a.current_rate is not None and a.baseline_rate is not None and a.current_rate <= a.baseline_rate
    ]


def sensitivity_warnings(comparisons: Sequence[PairedComparison]) -> list[str]:
    """One named warning per corpus whose suite cannot detect its gutted skill."""
    out = []
    for c in comparisons:
        if c.kind != "gutted" or c.model is not None:
            continue
        if c.difference is None or c.test in ("none", "two-proportion-z"):
            out.append(
                f"{WARN_INSENSITIVE_SUITE}: {c.skill}: no paired graded case, the suite's sensitivity is unknown"
            )
            continue
        if c.difference > 0 and c.p_uplift is not None and c.p_uplift < UPLIFT_TEST_ALPHA:
            continue
        out.append(
            f"{WARN_INSENSITIVE_SUITE}: {c.skill}: the suite cannot tell the skill from its gutted copy "
            f"(instructions removed: paired drop {_pts(c.difference)}, {ci(c.low, c.high, c.cases)}, "
            f"one-sided p = {c.p_uplift:.3g} over {c.cases} cases, needs < {UPLIFT_TEST_ALPHA:g}; "
            f"{len(insensitive_assertions(c))} of {len(c.assertions)} assertions pass as often without them)"
        )
    return out
