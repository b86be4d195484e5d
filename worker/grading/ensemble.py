"""Judge ensembles: combine several judges' verdicts and measure how much they agree. Pure.

Per assertion the combined verdict is the majority of the judges that graded the shard; a
tie counts as false (an assertion is proven only when most judges say so). The combined
verdict carries the evidence of the first judge on the winning side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from schemas.verdict import AssertionVerdict


@dataclass(frozen=True)
class Agreement:
    """How much the judges agreed on one shard (or a whole run, when merged)."""

    pairwise: dict[tuple[str, str], float]
    """For each pair of judges (sorted names), the share of assertions they agree on."""
    unanimous_share: float | None
    """Share of assertions all judges agree on; None with fewer than two judges."""


def majority(verdicts: Sequence[AssertionVerdict]) -> AssertionVerdict:
    """The combined verdict for one assertion from each judge's verdict on it (a tie is false)."""
    if not verdicts:
        raise ValueError("majority of no verdicts")
    passes = sum(v.passed for v in verdicts)
    passed = passes * 2 > len(verdicts)
    # The winning side is never empty: a majority of passes, or at least half fails.
    combined = next(v for v in verdicts if v.passed is passed)
    if 0 < passes < len(verdicts):
        split = f"judges split {passes}/{len(verdicts)} for pass"
        combined = combined.model_copy(update={"note": "; ".join(filter(None, [combined.note, split]))})
    return combined


def combine(per_judge: Sequence[Sequence[AssertionVerdict]]) -> list[AssertionVerdict]:
    """Combine each judge's verdict list (all in the same assertion order) by majority."""
    if not per_judge:
        return []
    lengths = {len(v) for v in per_judge}
    if len(lengths) != 1:
        raise ValueError(f"judges returned different verdict counts: {sorted(lengths)}")
    return [majority([judge[i] for judge in per_judge]) for i in range(lengths.pop())]


def agreement(per_judge: dict[str, Sequence[AssertionVerdict]]) -> Agreement:
    """Pairwise agreement between judges and the share of unanimous verdicts."""
    names = sorted(per_judge)
    pairwise: dict[tuple[str, str], float] = {}
    for a, b in combinations(names, 2):
        va, vb = per_judge[a], per_judge[b]
        same = sum(x.passed == y.passed for x, y in zip(va, vb, strict=True))
        pairwise[(a, b)] = same / len(va) if va else 1.0
    if len(names) < 2:
        return Agreement(pairwise, None)
    count = len(per_judge[names[0]])
    if count == 0:
        return Agreement(pairwise, 1.0)
    unanimous = sum(len({per_judge[n][i].passed for n in names}) == 1 for i in range(count))
    return Agreement(pairwise, unanimous / count)
