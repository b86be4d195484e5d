"""The reduced result of a run: what the md, json and junit reports are rendered from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.adaptive import AdaptivePlan
from schemas.comparison import AssertionQuality, PairedComparison
from schemas.constants import DEFAULT_THRESHOLD
from schemas.label import Agreement
from schemas.status import SandboxMode, ShardState, Verdict
from schemas.trajectory import Usage
from schemas.triggers import TriggerReport
from schemas.verdict import AssertionVerdict, JudgeAnswer


class CaseRun(BaseModel):
    """One shard as the report shows it."""

    model_config = ConfigDict(extra="forbid")

    shard_id: str
    """Shard id."""
    case_id: int
    """Eval case id."""
    model: str
    """Executor model."""
    epoch: int
    """Repetition index."""
    state: ShardState
    """Terminal state."""
    verdicts: list[AssertionVerdict] = Field(default_factory=list)
    """Combined verdict per assertion (graded shards only)."""
    judges: list[JudgeAnswer] = Field(default_factory=list)
    """Raw per-judge answers."""
    composite: float | None = None
    """Weighted share of the case's assertions passed (graded shards only)."""
    detail: str = ""
    """Why the shard was not graded (blocked status or infra error), when it was not."""
    stops_run: bool = False
    """Blocked by a status that stops the whole run (no isolation, no sandbox, a fixture needing git)."""
    sandbox: SandboxMode | None = None
    """Sandbox mode the executor ran under."""
    end_reason: str = ""
    """Why the executor stopped."""
    usage: Usage = Field(default_factory=Usage)
    """Executor usage."""
    judge_usage: Usage = Field(default_factory=Usage)
    """Judge usage."""
    skill_activated: bool | None = None
    """Whether the skill under test was loaded: a harness executor's own record, else, for a trigger shard,
    whether it is among the skills that fired (None: the executor records no activation)."""
    rejected_calls: list[str] = Field(default_factory=list)
    """Tool calls the harness's stream claimed that no proxied model response held (rejected, flagged)."""
    mock_findings: list[str] = Field(default_factory=list)
    """Mocked MCP calls whose input failed the mock's ``expect`` guard, or whose answer the harness misreported."""
    proposed_calls: list[str] = Field(default_factory=list)
    """Tool calls a model response held that the harness never ran: model proposed, never run."""
    refused_requests: list[str] = Field(default_factory=list)
    """Model requests the harness's proxy refused for what they asked (another model, a provider-side tool)."""
    mock_calls: list[str] = Field(default_factory=list)
    """The mocked MCP calls of the run, one line each: tool, input, ``ok`` or the error."""
    http_calls: list[str] = Field(default_factory=list)
    """The run's HTTP requests through the sandbox's proxy, one line each: method, URL, status, mocked or refused."""


class ClusteredRate(BaseModel):
    """A rate's 95% interval with the case as the sampling unit (docs/design/statistics.md).

    Epochs and assertions of one case are not independent trials: the Wilson interval over
    them is too narrow whenever cases differ. This one counts each case as one draw.
    """

    model_config = ConfigDict(extra="forbid")

    method: Literal["cluster-wilson"] = "cluster-wilson"
    """Wilson score interval on the design-effect-adjusted sample size, Student's t on cases - 1
    degrees of freedom (Korn and Graubard)."""
    clusters: int
    """Cases with at least one trial."""
    low: float
    """Lower bound of the 95% interval."""
    high: float
    """Upper bound."""
    design_effect: float
    """Clustered over binomial variance (at least 1): how many trials are worth one independent one."""


class Rate(BaseModel):
    """A proportion with its 95% Wilson interval (and the case-clustered one when trials share cases)."""

    model_config = ConfigDict(extra="forbid")

    passed: int
    """Successes."""
    total: int
    """Trials."""
    rate: float | None
    """passed / total (of ``weighted`` when set); None when total is 0."""
    low: float
    """Lower bound of the 95% Wilson interval over ``passed/total``, or over ``weighted`` when set."""
    high: float
    """Upper bound."""
    clustered: ClusteredRate | None = None
    """The interval with the case as the unit; None when no case has more than one trial (then
    Wilson's is valid) or fewer than two cases were graded."""
    weighted: tuple[float, float] | None = Field(default=None, exclude_if=lambda w: w is None)
    """Cases given unequal epochs (``--epochs auto``): (passed, trials) with each case weighted as
    one shard's worth. ``rate``, ``low`` and ``high`` are then of these counts, while ``passed``
    and ``total`` stay the raw verdicts. None (and left out of the json): the verdicts are pooled."""


class AssertionStat(BaseModel):
    """One assertion of one case across models and epochs."""

    model_config = ConfigDict(extra="forbid")

    case_id: int
    """Eval case id."""
    index: int
    """Position in the case's assertions."""
    text: str
    """Assertion text."""
    by_model: dict[str, Rate]
    """Pass rate per executor model over graded epochs (per harness × model pair in a sweep)."""
    by_harness: dict[str, Rate] = Field(default_factory=dict)
    """A sweep over several harnesses: the pass rate per harness over its models (the harness ×
    assertion matrix: which instruction works in which agent); empty otherwise."""
    pass_at_k: float | None = None
    """Mean over models of pass@k with k = epochs (graded epochs only)."""
    pass_hat_k: float | None = None
    """Mean over models of pass^k."""


class ModelSummary(BaseModel):
    """One executor model on one corpus."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """Executor model."""
    behavioural: Rate
    """Passed assertions / assertions in graded shards."""
    composite_mean: float | None
    """Mean over cases of each case's mean composite score over its graded shards."""
    composite_low: float
    """95% interval of the composite mean over cases (t on cases - 1 degrees of freedom; 0 below two cases)."""
    composite_high: float
    """Upper bound (1 below two cases)."""
    composite_cases: int | None = None
    """Cases the composite is the mean of (None in results written before it was recorded)."""

    @property
    def composite_interval(self) -> tuple[float, float] | None:
        """The composite's 95% interval over cases; None from fewer than two cases (nothing to show)."""
        if self.composite_cases is not None and self.composite_cases < 2:
            return None
        return self.composite_low, self.composite_high

    graded: int
    """Shards graded."""
    shards: int
    """Shards in total."""
    skill_activated: tuple[int, int] | None = None
    """Harness executors: (shards whose harness loaded the skill, shards where that was recorded);
    None when no shard recorded it."""


def case_label(case_id: int, names: Mapping[int, str] | None = None) -> str:
    """``case 2 (fix-note)`` for a case with a name (a plugin eval case's folder), else ``case 2``."""
    name = (names or {}).get(case_id)
    return f"case {case_id} ({name})" if name else f"case {case_id}"


class PluginCaseScore(BaseModel):
    """One case's score as ``plugin eval`` defines it, for one executor model."""

    model_config = ConfigDict(extra="forbid")

    case_id: int
    """Eval case id."""
    runs: int
    """Graded runs (epochs) the score averages."""
    score: float | None
    """Mean over the graded runs of each run's weighted share of graders passed; None: no graded run."""


class PluginSuiteScore(BaseModel):
    """A plugin eval suite's scores for one executor model."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """Executor model."""
    score: float | None
    """Mean of the scored cases' scores; None when no case was scored."""
    cases: list[PluginCaseScore]
    """Per case, in case order."""


class SkillResult(BaseModel):
    """One corpus in one variant."""

    model_config = ConfigDict(extra="forbid")

    skill: str
    """Skill name."""
    variant: str
    """``current`` or ``baseline@<ref>``."""
    bundle_key: str
    """Bundle key of the graded inputs."""
    corpus_file: str
    """Corpus path."""
    cases: int
    """Cases in the corpus."""
    behavioural: Rate
    """Passed assertions / assertions in graded shards, all models."""
    infra: dict[str, int]
    """Not graded (infra) by kind."""
    blocked: list[CaseRun]
    """Blocked shards, listed apart (a streamed reduce lists at most a thousand)."""
    blocked_total: int | None = None
    """How many shards were blocked, listed or not (None in results stored before it was kept)."""
    inconclusive: bool
    """True when the trustworthiness gate failed."""
    not_graded: int
    """Shards not graded (infra, blocked, and those with no terminal record yet)."""
    unfinished: int = 0
    """Shards with no terminal record in the store (missing, or still running when reduced): not
    graded, counted in ``not_graded`` and listed in ``infra`` as :data:`UNFINISHED`."""
    unplanned: int = 0
    """Cases of the corpus with no shard at all (a grade run with no recording of them): never
    graded, so the corpus cannot PASS on the cases that were (its verdict is then WARN)."""
    shard_count: int
    """Shards in total."""
    headline: str
    """``passed/graded (percent)`` or ``INCONCLUSIVE (<n>/<total> shards not graded — infra)``."""
    models: list[ModelSummary]
    """Per executor model."""
    assertions: list[AssertionStat]
    """Per assertion: model-by-assertion matrix, pass@k, pass^k."""
    runs: list[CaseRun]
    """Every shard."""
    evidence_verified_share: float | None = None
    """Of the judged passes whose quoted evidence was looked up, the share found in a tool call or
    result (a deterministic check's pass has no quote: it is read from the run itself)."""
    evidence_checked: int | None = None
    """How many judged passes ``evidence_verified_share`` is over (None in results stored before it was kept)."""
    judge_agreement: float | None = None
    """Mean pairwise agreement between judges (ensembles only)."""
    judge_unanimous: float | None = None
    """Share of assertions on which all judges agreed (ensembles only)."""
    sandbox_modes: list[str] = Field(default_factory=list)
    """Sandbox modes that ran."""
    plugin_scores: list[PluginSuiteScore] = Field(default_factory=list)
    """Claude Code plugin eval suites only: the per-case and suite scores as ``plugin eval`` defines them."""
    case_names: dict[int, str] = Field(default_factory=dict)
    """Case id -> the case's name, for the cases that have one (a plugin eval case's folder):
    reports show it beside the case's number."""
    usage: dict[str, Usage] = Field(default_factory=dict)
    """Usage and cost per model (executor and judge) of this corpus in this variant alone."""
    verdict: Literal["PASS", "WARN", "FAIL", "INCONCLUSIVE", "NOT GRADED", ""] = ""
    """The current arm's corpus against the run's threshold (empty for a baseline arm, which no
    threshold applies to): PASS only when its behavioural pass rate reaches the threshold and every
    case of it was planned (WARN when that rate reaches it but a case had no shard); a plugin
    eval suite's, only when every case's score reaches the case threshold (reducer/threshold.py)."""

    def case_label(self, case_id: int) -> str:
        """``case 2 (fix-note)``, or ``case 2`` for a case with no name."""
        return case_label(case_id, self.case_names)

    def case_cell(self, case_id: int) -> str:
        """``2 (fix-note)``, or ``2`` for a case with no name: a case column's cell."""
        return case_label(case_id, self.case_names).removeprefix("case ")

    @property
    def blocked_count(self) -> int:
        """Blocked shards, every one counted."""
        return len(self.blocked) if self.blocked_total is None else self.blocked_total


UNFINISHED = "missing or still running"
"""The ``infra`` entry of shards a reduce found no terminal record for."""


class CarriedReport(BaseModel):
    """A corpus ``--all-evals`` left out because its bundle key already has a report for the run's
    models: that earlier report stands, so its verdict is carried into this run's."""

    model_config = ConfigDict(extra="forbid")

    corpus_file: str
    """The corpus, as ``evals/<skill>.evals.json``."""
    skill: str
    """Its skill."""
    verdict: Literal["PASS", "WARN", "FAIL"]
    """What the earlier report concluded for it: the corpus's own verdict there (PASS or FAIL), or
    the report's verdict when the report predates a corpus's own."""
    report: str
    """The earlier report's JSON file, in the report folder."""

    def reason(self) -> str:
        """This corpus's line among the run's reasons."""
        return f"{self.skill}: {self.verdict} in its earlier report {self.report} (--force re-runs it)"


class RunResult(BaseModel):
    """Everything a run concluded."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    """Format version of this record."""
    run_id: str
    """Run id."""
    verdict: Verdict
    """PASS, WARN, FAIL or BLOCKED."""
    reasons: list[str]
    """Why the verdict is what it is."""
    skills: list[SkillResult]
    """Per corpus and variant."""
    aggregate_inconclusive: bool = False
    """More than 10% of corpora INCONCLUSIVE."""
    aggregate_headline: str = ""
    """Suite headline with several corpora."""
    leaderboard: list[ModelSummary] = Field(default_factory=list)
    """Executor models ranked by composite score across corpora."""
    usage: dict[str, Usage] = Field(default_factory=dict)
    """Usage and cost per model (executor and judge)."""
    judges: list[str] = Field(default_factory=list)
    """Judge models."""
    calibration: dict[str, str] = Field(default_factory=dict)
    """Judge -> ``ok``, ``failed: ...`` or ``not calibrated``."""
    template_hashes: dict[str, str] = Field(default_factory=dict)
    """SHA-256 of each prompt template used."""
    skipped: list[str] = Field(default_factory=list)
    """Corpora skipped before the run (named errors)."""
    carried: list[CarriedReport] = Field(default_factory=list, exclude_if=lambda c: not c)
    """Corpora ``--all-evals`` left out for their earlier report, whose verdicts this run carries
    (left out of the record when there are none)."""
    comparisons: list[PairedComparison] = Field(default_factory=list)
    """Paired comparisons of the current arm with each baseline arm (all models, then per model)."""
    harness_comparisons: list[PairedComparison] = Field(default_factory=list)
    """A sweep over several harnesses: each two harnesses paired on the same cases of the current
    arm (``kind`` ``harness``); they describe, and no gate reads them."""
    assertion_quality: list[AssertionQuality] = Field(default_factory=list)
    """Per assertion: non-discriminating, flaky, judge disagreement."""
    regression_alpha: float | None = None
    """``--regression-alpha``: only a significant one-sided drop is a regression (None: any drop)."""
    require_uplift: float | None = None
    """``--require-uplift`` margin over the no-skill arm (None: not required)."""
    triggers: TriggerReport | None = None
    """``run --triggers``: recall, false triggers, the confusion table and routing matrix (None otherwise)."""
    threshold: float = DEFAULT_THRESHOLD
    """Behavioural pass rate each corpus must reach to pass."""
    threshold_source: Literal["default", "--fail-under"] = "default"
    """Where the threshold came from."""
    plugin_threshold: float | None = None
    """``--threshold``: the score every case of a plugin eval suite must reach (None: the threshold above)."""

    adaptive: AdaptivePlan | None = None
    """``--epochs auto``: the epochs each case got and why it stopped (None: fixed epochs)."""
    human_agreement: list[Agreement] = Field(default_factory=list)
    """Each judge against people's labels of its verdicts (``skill-eval label``, the viewer): overall, then
    per assertion; empty while nobody labelled."""
    harnesses: list[str] = Field(default_factory=list)
    """A sweep over several harnesses: its harnesses in the order given, every row of its figures a
    harness × model pair; empty: one executor ran every model."""

    @model_validator(mode="after")
    def _harnesses_of_a_stored_result(self) -> RunResult:
        """A result stored before it named its harnesses: named from the figures kept per harness."""
        if "harnesses" not in self.model_fields_set:
            self.harnesses = self._swept_harnesses()
        return self

    def _swept_harnesses(self) -> list[str]:
        """The harnesses a sweep's figures were kept per, in the order given: the harnesses paired
        (each two in that order), then those of the harness × assertion matrix, then a trigger
        run's executors when its figures were measured under more than one."""
        named = [h for c in self.harness_comparisons for h in (c.baseline, c.harness or "")]
        named += [h for s in self.skills for a in s.assertions for h in a.by_harness]
        executors = dict.fromkeys(f.executor for f in self.triggers.figures) if self.triggers else {}
        if len(executors) > 1:
            named += executors
        return [h for h in dict.fromkeys(named) if h]
