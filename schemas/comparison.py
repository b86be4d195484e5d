"""Paired comparisons of two arms (current vs an old ref, or vs no skill) and assertion quality.

Both land in the stored run result and every report, so they are pydantic models.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TestName = Literal["mcnemar-exact", "sign-flip-exact", "sign-flip-monte-carlo", "two-proportion-z", "none"]


class CaseDelta(BaseModel):
    """One case's pass rate in each arm (mean over models of the kept epochs)."""

    model_config = ConfigDict(extra="forbid")

    case_id: int
    """Eval case id."""
    baseline_rate: float
    """Baseline arm."""
    current_rate: float
    """Current arm."""


class AssertionComparison(BaseModel):
    """One assertion of one case, current vs baseline, over the pairs of that case."""

    model_config = ConfigDict(extra="forbid")

    case_id: int
    """Eval case id."""
    index: int
    """Position in the case's assertions."""
    text: str
    """Assertion text."""
    baseline_rate: float | None
    """Pass rate in the baseline arm over the kept pairs."""
    current_rate: float | None
    """Pass rate in the current arm over the kept pairs."""
    pairs: int
    """(model, epoch) pairs kept: the epochs of one case are its repetitions."""
    better: int
    """Pairs passed only in the current arm."""
    worse: int
    """Pairs passed only in the baseline arm."""
    p_two_sided: float
    """McNemar's exact test over the pairs."""
    p_drop: float
    """One-sided p of a drop (current worse)."""
    p_drop_holm: float
    """``p_drop`` after Holm's adjustment over the family: the overall test and every assertion."""


class FlipRate(BaseModel):
    """How often two identical arms disagreed on one case, or on one assertion of one case."""

    model_config = ConfigDict(extra="forbid")

    case_id: int
    """Eval case id."""
    index: int | None = None
    """Position in the case's assertions; None for the whole case."""
    flips: int
    """(model, epoch, assertion) pairs whose verdicts differ between the two arms."""
    pairs: int
    """(model, epoch, assertion) pairs graded in both arms."""
    flip_rate: float
    """``flips / pairs``."""


class NoiseFloor(BaseModel):
    """The run's own noise, measured by running the current skill twice (``--baseline same``)."""

    model_config = ConfigDict(extra="forbid")

    discordance: float
    """Share of (case, model, epoch, assertion) pairs whose verdicts differ between identical arms."""
    flips: int
    """Discordant pairs."""
    pairs: int
    """Pairs graded in both arms."""
    low: float
    """Lower bound of the 95% interval of the discordance, the case as the unit."""
    high: float
    """Upper bound."""
    method: Literal["cluster-wilson", "wilson"] = "cluster-wilson"
    """How the interval was computed: one case one draw, or Wilson's over the pairs of a single case."""
    cases: int
    """Cases with a kept pair."""
    epochs: int
    """Most pairs any (case, model) had: the epochs the figure below assumes."""
    min_detectable: float | None
    """Smallest difference of pass rate a paired comparison of this many cases and epochs detects
    (alpha and power below) when the difference's one-way discordant pairs come on top of the
    observed noise; None when no difference is detectable at this size (or every pair flipped)."""
    alpha: float = 0.05
    """One-sided level of the test behind ``min_detectable`` (the regression test's)."""
    power: float = 0.8
    """Power behind ``min_detectable``."""
    per_case: list[FlipRate] = Field(default_factory=list)
    """Flip rate per case."""
    per_assertion: list[FlipRate] = Field(default_factory=list)
    """Flip rate per assertion of each case."""


class NoiseRecord(BaseModel):
    """The latest noise floor of one skill's corpus, kept in the store for later runs' power figures."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    """Format version of this record."""
    run_id: str
    """The ``--baseline same`` run that measured it."""
    skill: str
    """Skill name."""
    corpus_file: str
    """The corpus, relative to the repo."""
    bundle_key: str
    """Bundle key of the run (the skill text and corpus it measured)."""
    discordance: float
    """Observed share of discordant pairs."""
    pairs: int
    """Pairs behind it."""
    cases: int
    """Cases behind it."""


class PairedComparison(BaseModel):
    """The current arm against one baseline arm, for one executor model or all of them."""

    model_config = ConfigDict(extra="forbid")

    skill: str
    """Skill name."""
    baseline: str
    """Baseline variant: ``baseline@<ref>`` or ``no-skill``."""
    kind: Literal["compare", "no-skill", "same", "gutted", "harness"]
    """Old-vs-new (``--compare``), with-vs-without (``--baseline no-skill``) or the current skill
    against itself (``--baseline same``: the noise floor) or against its gutted copy (``--baseline
    gutted``: the suite's sensitivity); ``harness``: a sweep's harness against another on the same
    cases (``baseline`` the first harness, ``harness`` the second)."""
    harness: str | None = None
    """``harness`` comparisons: the harness measured against ``baseline`` (None otherwise)."""
    model: str | None
    """Executor model, or None for all models together (per-case differences averaged over models)."""
    cases: int
    """Cases with at least one kept pair: the unit of the test and the interval."""
    pairs: int
    """(case, model, epoch) pairs kept (both sides graded)."""
    dropped: int
    """Pairs dropped because either side was not graded (infra, blocked, budget, never finished)."""
    dropped_by: dict[str, int] = Field(default_factory=dict)
    """Dropped pairs by ``<arm>:<state>`` of the side that was not graded (both counted when both)."""
    baseline_rate: float | None
    """Mean over cases of the baseline arm's pass rate (kept pairs only)."""
    current_rate: float | None
    """Mean over cases of the current arm's pass rate (kept pairs only)."""
    difference: float | None
    """``current_rate - baseline_rate``: the uplift (negative: a drop)."""
    low: float | None
    """Lower bound of the 95% score interval of the difference over cases (``reducer.paired.paired_interval``)."""
    high: float | None
    """Upper bound."""
    test: TestName
    """Which test gave the p-values."""
    p_two_sided: float | None
    """Two-sided p of no difference."""
    p_drop: float | None
    """One-sided p of a drop (the regression test)."""
    p_uplift: float | None
    """One-sided p of an uplift."""
    better: int
    """Cases whose pass rate is higher in the current arm."""
    worse: int
    """Cases whose pass rate is lower in the current arm."""
    bootstrap_resamples: int = 0
    """Resamples behind the interval: 0, the score interval resamples nothing (kept for readers of
    reports written by a percentile bootstrap)."""
    seed: int = 0
    """Seed of any Monte Carlo p, derived from the run id."""
    per_case: list[CaseDelta] = Field(default_factory=list)
    """The unit of the test: each case's rate in both arms."""
    assertions: list[AssertionComparison] = Field(default_factory=list)
    """Per assertion (all-models comparison only)."""
    note: str = ""
    """What the reader must know (why unpaired, why no test)."""
    noise: NoiseFloor | None = None
    """``--baseline same`` (all-models comparison only): the flip rates and what they let a run detect."""


class AssertionQuality(BaseModel):
    """How much one assertion can tell, computed from its results across the run."""

    model_config = ConfigDict(extra="forbid")

    skill: str
    """Skill name."""
    case_id: int
    """Eval case id."""
    index: int
    """Position in the case's assertions."""
    text: str
    """Assertion text."""
    observations: int
    """Graded verdicts of this assertion across every model, epoch and variant."""
    pass_rate: float | None
    """Share of those verdicts that passed."""
    non_discriminating: bool
    """Passes (or fails) for every model, epoch and variant: it cannot tell arms or models apart."""
    constant: Literal["pass", "fail", ""] = ""
    """Which way a non-discriminating assertion always goes."""
    flaky_in: list[str] = Field(default_factory=list)
    """``<variant>/<model>`` groups whose verdict changed across epochs."""
    flip_rate: float | None = None
    """Share of (variant, model) groups with two or more epochs in which the verdict changed."""
    judge_disagreement: float | None = None
    """Share of ensemble-graded shards where the judges did not all agree on it (None: no ensemble)."""

    @property
    def flaky(self) -> bool:
        return bool(self.flaky_in)
