"""Adaptive epochs: what a run with ``--epochs auto`` planned, and where each case stopped.

The record lives in the run's plan (so a stored run, resubmitted or reported again, knows its
epochs were adaptive and how many each case got) and is copied into its result.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.base import FrozenModel

StopReason = Literal["", "decided", "stable", "max-epochs", "max-cost", "not-graded"]
"""Why a case got no more epochs: its corpus's gate was decided; its verdicts never varied
(another epoch cannot move the figure); it reached ``--max-epochs``; the cost cap ended the
run; none of its shards was graded (infra, for ``resubmit``, not for more epochs). Empty while
it may still get more."""

FIRST_ROUND = 3
"""Epochs every case gets before anything is decided. Three, not two: a case whose pass chance
is one half shows identical verdicts in all of its first epochs with probability 1/4 at three
(1/2 at two), so far fewer uncertain cases are mistaken for stable ones; and an odd count
gives each case a majority."""

STEP = 2
"""Epochs an uncertain case gets per later round: fewer looks than one at a time (each look
costs its share of the error rate), yet fine enough not to overshoot the decision by much."""

ALPHA = 0.05
"""The error rate of the adaptive decision over all its looks together."""


class CaseEpochs(FrozenModel):
    """How many epochs one case of one corpus was given, and why it stopped."""

    skill: str
    case_id: int
    epochs: int = Field(ge=1)
    stopped: StopReason = ""


class GateLook(FrozenModel):
    """One corpus's (or, in a sweep, one harness × model pair's) gated figure at the last look: its
    interval at the corrected level."""

    skill: str
    row: str | None = Field(default=None, exclude_if=lambda row: row is None)
    """In a sweep over several harnesses, the harness × model pair this look is of (each pair is
    decided on its own); None (and left out of the record): the corpus's models pooled."""
    figure: Literal["pass-rate", "paired-difference"]
    target: float
    """The threshold (pass rate) or the margin (paired difference) the gate compares with."""
    estimate: float | None = None
    low: float = 0.0
    high: float = 1.0
    level: float
    """Confidence level of this look's interval: 1 - alpha / looks (Bonferroni over looks)."""
    decided: Literal["", "above", "below"] = ""
    """Which side of the target the whole interval lies on; empty: not decided."""


class AdaptivePlan(FrozenModel):
    """``--epochs auto``: the rule a run follows and, as it goes, each case's epochs."""

    first_round: int = Field(default=FIRST_ROUND, ge=1)
    max_epochs: int = Field(ge=1)
    step: int = Field(default=STEP, ge=1)
    alpha: float = Field(default=ALPHA, gt=0, lt=1)
    looks_done: int = 0
    cases: tuple[CaseEpochs, ...] = ()
    """Every case's epochs so far (empty before the first round ended)."""
    gates: tuple[GateLook, ...] = ()
    """Each corpus's gated figure at the last look."""

    @property
    def looks(self) -> int:
        """Looks planned at most: the first round's, then one per later round of ``step`` epochs."""
        return 1 + -(-(self.max_epochs - self.first_round) // self.step)

    @property
    def level(self) -> float:
        """Each look's confidence level: the error rate spread evenly over the planned looks."""
        return 1 - self.alpha / self.looks

    def epochs_of(self, skill: str, case_id: int) -> int:
        """The epochs planned for a case (the first round's before any look)."""
        for c in self.cases:
            if c.skill == skill and c.case_id == case_id:
                return c.epochs
        return self.first_round


def adaptive_plan(max_epochs: int, first_round: int = FIRST_ROUND) -> AdaptivePlan:
    """The rule for ``--epochs auto --max-epochs N``: a first round of at most ``N`` epochs."""
    if max_epochs < 1:
        raise ValueError("--max-epochs must be at least 1")
    return AdaptivePlan(first_round=min(first_round, max_epochs), max_epochs=max_epochs)
