"""Trigger evaluation: the trigger corpus (``evals/<skill>.triggers.json``), its run settings and
the figures a trigger run reports. Decisions: docs/design/triggers.md.

A trigger case is a bare user query and whether the skill should fire for it. These models
describe a trigger set that already passed :mod:`producer.corpus.trigger_validation`, which owns the
rules and their ``BLOCKED_BAD_CORPUS`` messages; the limits both hold are defined here once, so the
published JSON Schema (``skill-eval schema trigger-set``) states what the validator enforces.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from schemas.base import FrozenModel

TRIGGERS_SUFFIX = ".triggers.json"
"""The trigger corpus beside the behavioural one: ``evals/<skill>.triggers.json``."""
DEFAULT_TRIGGER_TURNS = 3
"""Model turns a trigger shard gets before it ends without an activation."""
MAX_QUERY_CHARS = 20_000
"""A query is what a user types; more is not a query."""
MAX_TRIGGERS = 5_000
"""The most queries a trigger set holds."""
NON_BLANK = r"\S"
"""A query holds some text that is not white space."""
NO_ACTIVATION = "(none)"
"""The confusion table's and the routing matrix's column for a query where no skill fired."""


class TriggerCase(FrozenModel):
    """One query and whether the skill under test should fire for it."""

    id: int = Field(ge=0)
    """Unique within its trigger set."""
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, pattern=NON_BLANK)
    """What the user types, sent bare (implicit invocation)."""
    should_trigger: bool
    """True: a positive (the skill should fire); False: a negative (it should not)."""


class TriggerSet(FrozenModel):
    """A skill's trigger corpus: at least one positive and one negative."""

    skill_name: str
    """The skill under test (equals the file stem)."""
    triggers: tuple[TriggerCase, ...] = Field(min_length=2, max_length=MAX_TRIGGERS)
    """The queries, in file order."""

    def case(self, case_id: int) -> TriggerCase:
        for case in self.triggers:
            if case.id == case_id:
                return case
        raise KeyError(case_id)


class TriggerSettings(FrozenModel):
    """``run --triggers``: how a trigger shard runs and what gates the verdict."""

    turns: int = Field(default=DEFAULT_TRIGGER_TURNS, ge=1, le=50)
    """Model turns before a shard without an activation ends (``--trigger-turns``)."""
    min_recall: float | None = Field(default=None, ge=0, le=1)
    """FAIL when a skill's recall is below this (``--min-recall``); None: not gated."""
    max_false_trigger: float | None = Field(default=None, ge=0, le=1)
    """FAIL when a skill's false-trigger rate is above this (``--max-false-trigger``); None: not gated."""


class Proportion(FrozenModel):
    """``hits/total`` with its 95% interval over queries (rate None when total is 0).

    A query's epochs are not independent runs (a query that routes one way tends to route so
    every time), so the interval is the case-clustered one of the behavioural rates with the
    query as the case (:func:`reducer.stats.clustered_interval`); 0 to 1 from fewer than two queries."""

    hits: int
    total: int
    rate: float | None
    low: float
    high: float
    queries: int | None = None
    """Queries with a run in ``total``: what the interval is over (None in results written before)."""


class QueryRate(FrozenModel):
    """One query over its epochs: how often the skill under test fired."""

    case_id: int
    query: str
    should_trigger: bool
    fired: int
    """Epochs in which the skill under test fired."""
    runs: int
    """Epochs that ran to an end (shards not ended are left out)."""
    flaky: bool
    """Fired in some epochs and not in others."""
    instead: dict[str, int] = Field(default_factory=dict)
    """Skill that fired first instead of the one under test (or ``(none)``) -> epochs."""


TriggerGate = Literal["--min-recall", "--max-false-trigger"]
"""A trigger gate, by its flag."""


class GateFailure(FrozenModel):
    """A trigger gate one skill's row missed."""

    gate: TriggerGate
    reason: str
    """Why, in words: ``recall 1/4 (25.0%) is below 80%``, or that the figure was not measured."""


class TriggerFigures(FrozenModel):
    """One skill under one executor model (or harness × model pair): recall, false triggers, precision, F1."""

    skill: str
    model: str
    """The executor model; in a sweep over several harnesses its row, ``<harness> × <model>``."""
    executor: str = "agent"
    """The executor the figures were measured under (in a sweep, the row's harness)."""
    recall: Proportion
    """Positive runs where the skill fired / positive runs."""
    false_trigger: Proportion
    """Negative runs where the skill fired / negative runs."""
    precision: Proportion
    """Runs where the skill fired on a positive / runs where it fired."""
    f1: float | None
    """Harmonic mean of precision and recall (None when either is undefined)."""
    f1_low: float | None = None
    f1_high: float | None = None
    """F1 of the interval bounds of precision and recall: a conservative 95% range."""
    queries: list[QueryRate] = Field(default_factory=list)
    confusion: dict[str, int] = Field(default_factory=dict)
    """Missed positive runs by what fired first instead: a skill's name, or ``(none)``."""
    not_ended: int = 0
    """Shards that did not end with a record of what fired (infra failures, blocked)."""
    failed: list[GateFailure] = Field(default_factory=list)
    """The gates this row missed (empty: it met every gate set, none was set, or its skill was
    INCONCLUSIVE and not gated)."""

    def failure_line(self, failure: GateFailure) -> str:
        """A gate missed as the reports list it: ``<skill> (<row>): <reason>``."""
        return f"{self.skill} ({self.model}): {failure.reason}"

    @property
    def failure_lines(self) -> list[str]:
        """Every gate missed, one line each."""
        return [self.failure_line(g) for g in self.failed]


class PairedChange(FrozenModel):
    """``current - baseline`` of a rate, paired per query (the query is the unit)."""

    difference: float | None
    """Mean over queries of each query's paired rate difference (None: no query paired)."""
    low: float | None = None
    high: float | None = None
    """95% score interval over queries (``reducer.paired.paired_interval``), printed from
    ``MIN_INTERVAL_CASES`` queries up."""
    p_two_sided: float | None = None
    """Exact sign-flip (paired permutation) test; McNemar's with one run per query."""
    queries: int = 0
    """Queries with at least one pair (same model and epoch ended in both arms)."""


class TriggerChange(FrozenModel):
    """``--compare REF``: one skill's recall and false-trigger rate against its description at REF."""

    skill: str
    baseline: str
    """``baseline@<ref>``."""
    recall: PairedChange
    """Over positive queries: positive means the current description fires more often where it should."""
    false_trigger: PairedChange
    """Over negative queries: positive means the current description fires more often where it should not."""


class TriggerReport(FrozenModel):
    """Every skill's trigger figures, the routing matrix and the gates that applied."""

    version: Literal[1] = 1
    turns: int = DEFAULT_TRIGGER_TURNS
    figures: list[TriggerFigures] = Field(default_factory=list)
    routing: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Skill under test -> skill that fired first on its positives (or ``(none)``) -> runs."""
    min_recall: float | None = None
    max_false_trigger: float | None = None
    failures: list[str] = Field(default_factory=list)
    """Every row's gate failures, one line each (:attr:`TriggerFigures.failure_lines`; empty:
    nothing gated failed)."""
    changes: list[TriggerChange] = Field(default_factory=list)
    """``--compare REF``: per skill, the paired change of recall and false-trigger rate."""
    baselines: dict[str, list[TriggerFigures]] = Field(default_factory=dict)
    """``--compare REF``: each baseline arm (``baseline@<ref>``) -> its own figures per skill and row,
    shown beside the current ones; never gated (the paired changes gate nothing either)."""

    @model_validator(mode="before")
    @classmethod
    def _rows_failed(cls, data: Any) -> Any:
        """A report stored before each row kept its own failures: its lines given back to their rows."""
        if not isinstance(data, dict) or not data.get("failures"):
            return data
        figures = data.get("figures") or []
        if not all(isinstance(f, dict) and "failed" not in f for f in figures):
            return data
        return {**data, "figures": [{**f, "failed": _failed_of(f, data["failures"])} for f in figures]}


def _failed_of(figure: dict[str, Any], lines: list[str]) -> list[dict[str, str]]:
    """One row's gate failures among a stored report's lines (``<skill> (<row>): <reason>``).

    A line is split at its last ``"): "``: no reason holds one, so what comes before names exactly
    one row, however its model is spelled (a row named ``m): recall`` never takes row ``m``'s lines).
    """
    name = f"{figure.get('skill')} ({figure.get('model')}"
    out = []
    for line in lines:
        head, sep, reason = str(line).rpartition("): ")
        if sep and head == name:
            gate = "--min-recall" if reason.startswith("recall") else "--max-false-trigger"
            out.append({"gate": gate, "reason": reason})
    return out
