"""The run manifest: everything a worker on any host needs to carry out a shard.

Stored once per run at ``runs/<run_id>/manifest.json``; queue messages carry only the run
and shard ids, and workers read (and cache) the manifest by run id.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.base import FrozenModel
from schemas.model_config import ModelConfig
from schemas.report import CarriedReport
from schemas.shard import RunPlan, Shard
from schemas.triggers import TriggerSettings

EXECUTE_MARGIN_S = 120.0
"""Real time an execute task gets past its shard's wall clock (workspace, final files, upload)
before its own deadline ends it as infra."""

FLEET_WAIT_ALLOWANCE_S = EXECUTE_MARGIN_S / 2
"""At most this much waiting on the fleet (the limiter, a 429's cool-down, retries) is left out of
an agent's wall clock; past it the waits count again. So the clock always runs out before the
task's deadline: an agent that provokes waits (a harness can send its proxy what it likes) gains
a minute at most and can never turn its own timeout into an infra failure."""


class AgentBudget(FrozenModel):
    """Per-shard limits of the executor; hitting one ends the trajectory (behaviour, not infra)."""

    max_turns: int = Field(default=40, ge=1)
    """Model calls the loop may make."""
    max_tokens: int = Field(default=400_000, ge=1)
    """Prompt plus completion tokens over all calls."""
    wall_clock_s: float = Field(default=900.0, gt=0)
    """Seconds for the whole loop. Checked before every model call and tool call, and a command
    is given no more than what remains; a model call already in flight is bounded by the
    model's own timeout, not cut (cutting it would turn behaviour into an infra failure).
    Time the model calls waited on the fleet is left out, up to ``FLEET_WAIT_ALLOWANCE_S``."""
    max_output_tokens: int = Field(default=4096, ge=1)
    """Completion tokens asked for per call."""
    command_timeout_s: float = Field(default=60.0, gt=0)
    """Per-command timeout the sandbox applies; a command is cut shorter only when less wall clock remains."""


class RunSettings(FrozenModel):
    """How the run executes and grades; fixed at submit time."""

    budget: AgentBudget = Field(default_factory=AgentBudget)
    """Executor budget per shard."""
    executor: str = "agent"
    """``agent`` (the built-in tool loop), a harness (``claude-code``, ``codex``) or ``cmd:<command line>``."""
    invoke: Literal["explicit", "implicit"] = "explicit"
    """Harness executors: tell the harness to use the skill (explicit) or give the bare prompt (implicit)."""
    strict_evidence: bool = False
    """Turn a pass whose evidence cannot be found in the transcript into a fail."""
    calibrate: bool = True
    """Grade the built-in calibration trajectories with each judge before the batch."""
    calibrate_with: tuple[str, ...] = ()
    """Earlier runs whose human-labelled verdicts are graded too (``--calibrate-with``): a judge
    must give the people's verdict on each, or its calibration fails."""
    fail_under: float | None = None
    """Behavioural pass rate below which the verdict is FAIL."""
    regression_alpha: float | None = Field(default=None, gt=0, lt=1)
    """Against an old ref, only a one-sided drop significant at this level (Holm over assertions) fails."""
    require_uplift: float | None = Field(default=None, ge=-1, lt=1)
    """FAIL unless the lower bound of the uplift over the no-skill arm is above this margin."""
    plugin_threshold: float | None = Field(default=None, ge=0, le=1)
    """``--threshold``: a Claude Code plugin eval suite fails when any case's score is below it; None: no gate."""
    max_cost_usd: float | None = Field(default=None, gt=0)
    """Run-wide cap on model spend, executor and judge together (``--max-cost``); None: no cap."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Run-wide cap on model tokens, executor and judge together (``--max-tokens``); None: no cap."""
    models: ModelConfig = Field(default_factory=ModelConfig)
    """The validated model config (limits, API bases, api key *names* only, never keys), for workers anywhere."""
    triggers: TriggerSettings | None = None
    """``run --triggers``: shards run the trigger queries and record which skills fired; None: a behavioural run."""


class RunManifest(FrozenModel):
    """The plan plus where its inputs live in the artifact store."""

    version: Literal[1] = 1
    """Format version of this record."""
    plan: RunPlan
    """Shards, corpora, models, judges, epochs, variants."""
    snapshots: dict[str, str]
    """Variant -> snapshot key of the repo tree to materialize."""
    settings: RunSettings = Field(default_factory=RunSettings)
    """Execution and grading settings."""
    repo: str = ""
    """Where the repo came from (a local path or an s3:// URI), for the report."""
    out_dir: str = ""
    """Report folder the submitting client asked for."""
    project: str = ""
    """Project name for the run-log line."""
    branch: str = "-"
    """Git branch of the repo at submit time, or ``-``."""
    sha7: str = "-"
    """Short git commit of the repo at submit time, or ``-``."""
    skipped: list[str] = Field(default_factory=list)
    """Corpora skipped before the run, with their named errors."""
    reported: list[CarriedReport] = Field(default_factory=list)
    """Corpora ``--all-evals`` left out because an earlier report covers them, each with that report's verdict."""
    guards: list[str] = Field(default_factory=list)
    """Guards hit before the run (GUARD_NO_GIT, GUARD_BAD_REF): what was not compared, and why."""

    def shard(self, shard_id: str) -> Shard:
        for shard in self.plan.shards:
            if shard.shard_id == shard_id:
                return shard
        raise KeyError(shard_id)

    def executors(self) -> dict[str, tuple[str, ...]]:
        """Each executor of the run -> the models it runs: a sweep's pairs, or the one executor with every model."""
        return dict(self.plan.harnesses) or {self.settings.executor: self.plan.models}

    @property
    def executor_label(self) -> str:
        """The run's executor, or a sweep's executors in the order given."""
        return ", ".join(self.plan.harnesses) or self.settings.executor

    def executor_of(self, shard: Shard) -> str:
        """The ``--executor`` value a shard runs under."""
        return shard.harness or self.settings.executor


class RunOutline(FrozenModel):
    """The manifest without its shard list: all a streamed reduce needs, a few KB at any size.

    Every (variant, corpus, case, model, epoch) of the plan is one shard, so the counts the
    reducer needs follow from the corpora, models, epochs and variants alone.
    """

    version: Literal[1] = 1
    """Format version of this record."""
    manifest: RunManifest
    """The manifest with ``plan.shards`` left empty."""
    shard_count: int
    """How many shards the full plan has."""

    @classmethod
    def of(cls, manifest: RunManifest) -> RunOutline:
        plan = manifest.plan.model_copy(update={"shards": ()})
        return cls(manifest=manifest.model_copy(update={"plan": plan}), shard_count=len(manifest.plan.shards))


def manifest_key(run_id: str) -> str:
    return f"runs/{run_id}/manifest.json"


def trajectory_key(run_id: str, shard_id: str) -> str:
    return f"runs/{run_id}/trajectories/{shard_id}.json"


def grade_key(run_id: str, shard_id: str) -> str:
    return f"runs/{run_id}/grades/{shard_id}.json"


def outcome_key(run_id: str, shard_id: str) -> str:
    """How a shard ended (a ``ShardOutcomeRecord``)."""
    return f"runs/{run_id}/outcomes/{shard_id}.json"


def attempt_key(run_id: str, attempt: int, kind: str, shard_id: str) -> str:
    """Attempt ``attempt`` (0 first, then one per resubmit) of a shard's final ``kind`` record
    (``outcomes`` or ``grades``), committed first-writer-wins and never overwritten."""
    return f"runs/{run_id}/attempts/{attempt}/{kind}/{shard_id}.json"


def outline_key(run_id: str) -> str:
    """The manifest's outline (a ``RunOutline``), rewritten with every manifest revision."""
    return f"runs/{run_id}/outline.json"


def result_key(run_id: str) -> str:
    return f"runs/{run_id}/result.json"


def run_end_key(run_id: str) -> str:
    """How a run ended without a result (a ``RunEnd``): refused by its checks, or stopped."""
    return f"runs/{run_id}/end.json"


def calibration_key(run_id: str, judge: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in judge)
    return f"runs/{run_id}/calibration/{safe}.json"


def noise_key(skill: str) -> str:
    """The latest noise floor measured for a skill's corpus (a ``NoiseRecord``), across runs."""
    return f"noise/{skill}.json"
