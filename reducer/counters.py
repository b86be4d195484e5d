"""The counters the reduce folds outcome lines into: per corpus and variant, per model, per assertion. Pure.

Memory is counters per (corpus, case, assertion, model); nothing here holds a shard, so a
run of a million shards reduces in the memory of its plan. :mod:`reducer.stream` adds lines
to these and turns them into the result's figures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from reducer.scoring import rate
from reducer.stats import composite_interval
from schemas.outcome import OutcomeLine
from schemas.report import CaseRun, ModelSummary
from schemas.status import ShardState
from schemas.trajectory import Usage


@dataclass
class Mean:
    """Composite scores in [0, 1] summed per case: their mean over cases and its interval.

    A case's epochs are not independent draws (a deterministic case scores the same every
    epoch), so the unit is the case: each case's mean composite, then the mean of those and a t
    interval on cases - 1 degrees of freedom, never narrower than the case-clustered Wilson one
    (:func:`reducer.stats.composite_interval`). Memory is two numbers per case.
    """

    cases: dict[object, list[float]] = field(default_factory=dict)
    """Case key -> [sum of its shards' composites, its graded shards]."""

    def add(self, value: float, case: object = None) -> None:
        """One graded shard's composite; ``case``: its case's key (None: a case of its own)."""
        key = ("shard", len(self.cases)) if case is None else case
        cell = self.cases.setdefault(key, [0.0, 0.0])
        cell[0] += value
        cell[1] += 1

    @property
    def n(self) -> int:
        """Cases with a graded shard."""
        return len(self.cases)

    def interval(self) -> tuple[float | None, tuple[float, float]]:
        """The mean of the per-case composites and its 95% interval over cases (``(0, 1)`` below two cases)."""
        return composite_interval([total / shards for total, shards in self.cases.values()])


@dataclass
class ModelCounts:
    """One executor model's shards, verdicts and composite scores (in one arm, or on the leaderboard)."""

    graded: int = 0
    passed: int = 0
    judged: int = 0
    composite: Mean = field(default_factory=Mean)
    activated: list[int] = field(default_factory=lambda: [0, 0])
    """[shards whose harness loaded the skill, shards where that was recorded]."""

    def summary(self, model: str, shards: int, clusters: Sequence[tuple[int, int]]) -> ModelSummary:
        """The model's row: its rate (``clusters``: its (passed, verdicts) per case), composite mean and
        interval, graded of ``shards`` planned, and how often its harness loaded the skill."""
        mean, (low, high) = self.composite.interval()
        return ModelSummary(
            composite_cases=self.composite.n,
            model=model,
            behavioural=rate(self.passed, self.judged, clusters),
            composite_mean=mean,
            composite_low=low,
            composite_high=high,
            graded=self.graded,
            shards=shards,
            skill_activated=(self.activated[0], self.activated[1]) if self.activated[1] else None,
        )

    def add_graded(self, passed: int, judged: int, score: float, case: tuple[str, int]) -> None:
        """Count one graded shard: ``passed`` of its ``judged`` verdicts, and its composite ``score``
        for its ``case`` (corpus, case id): the composite's interval is over cases."""
        self.graded += 1
        self.passed += passed
        self.judged += judged
        self.composite.add(score, case)


class Spend:
    """Usage summed without a model object per line (what :meth:`Usage.add` does, in place)."""

    __slots__ = ("calls", "completion", "cost", "priced", "prompt")

    def __init__(self) -> None:
        self.prompt = self.completion = self.calls = 0
        self.cost = 0.0
        self.priced = False

    def add(self, u: tuple[int, int, int, float | None]) -> None:
        self.prompt += u[0]
        self.completion += u[1]
        self.calls += u[2]
        if u[3] is not None:
            self.cost += u[3]
            self.priced = True

    def usage(self) -> Usage:
        cost = self.cost if self.priced else None
        return Usage(prompt_tokens=self.prompt, completion_tokens=self.completion, calls=self.calls, cost_usd=cost)


@dataclass
class Arm:
    """One corpus in one variant."""

    states: dict[ShardState, int] = field(default_factory=lambda: defaultdict(int))
    rows: list[CaseRun] = field(default_factory=list)
    """Per-shard rows, in the order added (kept only when the reducer keeps rows)."""
    blocked: list[CaseRun] = field(default_factory=list)
    models: dict[str, ModelCounts] = field(default_factory=dict)
    cells: dict[tuple[int, int, str], list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    """(case, assertion index, model) -> [passed, observed]."""
    graded_cases: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Case -> models with a graded shard of it."""
    verified: list[int] = field(default_factory=lambda: [0, 0])
    agreement: list[float] = field(default_factory=lambda: [0.0, 0.0])
    unanimous: list[float] = field(default_factory=lambda: [0.0, 0.0])
    sandboxes: set[str] = field(default_factory=set)
    run_scores: dict[tuple[int, str], list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))
    """(case, model) -> [sum of graded runs' composites, graded runs], for plugin eval's case scores."""
    spend: dict[str, Spend] = field(default_factory=lambda: defaultdict(Spend))
    """Usage per model (executor and judges) of this corpus and variant alone."""

    def model(self, name: str) -> ModelCounts:
        """The counts of one executor model, made on first use."""
        counts = self.models.get(name)
        if counts is None:
            counts = self.models[name] = ModelCounts()
        return counts

    def add_graded(self, line: OutcomeLine, model: str, score: float) -> None:
        """Count one graded shard of ``model`` (its row): its case's composite ``score``, each
        assertion's verdict, its evidence checks and its judges' agreement."""
        run_score = self.run_scores[(line.case_id, model)]
        run_score[0] += score
        run_score[1] += 1
        self.graded_cases[line.case_id].add(model)
        self.verified[0] += line.verified[0]
        self.verified[1] += line.verified[1]
        self.agreement[0] += line.agreement[0]
        self.agreement[1] += line.agreement[1]
        if line.unanimous is not None:
            self.unanimous[0] += line.unanimous
            self.unanimous[1] += 1
        for index, passed in enumerate(line.passed):
            cell = self.cells[(line.case_id, index, model)]
            cell[0] += passed
            cell[1] += 1


def clusters_of(arms: Sequence[Arm], model: str | None = None) -> list[tuple[int, int]]:
    """(passed, verdicts) per case of these arms (each arm its own corpus), of one model or all:
    the units of a clustered interval."""
    totals: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    for i, arm in enumerate(arms):
        for (case_id, _, name), (passed, observed) in arm.cells.items():
            if model is None or name == model:
                totals[(i, case_id)][0] += passed
                totals[(i, case_id)][1] += observed
    return [(c, n) for c, n in totals.values()]


def usage_from(u: tuple[int, int, int, float | None]) -> Usage:
    """An outcome line's usage tuple as a :class:`Usage`."""
    return Usage(prompt_tokens=u[0], completion_tokens=u[1], calls=u[2], cost_usd=u[3])
