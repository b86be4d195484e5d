"""What ``run --dry-run --json`` and ``status --json`` print: the plan at a glance, a run's progress."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.adaptive import AdaptivePlan
from schemas.base import FrozenModel
from schemas.run_end import RunEnd


class CorpusPlan(FrozenModel):
    """One corpus of a planned run."""

    skill: str
    """The skill the corpus evaluates."""
    corpus: str
    """The corpus file, relative to the repo."""
    bundle_key: str
    """Hash of skill text, corpus and grader: equal keys grade the same thing."""
    cases: int
    """Cases in the corpus."""
    assertions: int
    """Assertions over all cases."""
    shards: int
    """cases x models x epochs x variants."""


class PlanTotals(FrozenModel):
    """Sums over every corpus of the plan."""

    corpora: int
    cases: int
    assertions: int
    shards: int


class HarnessPair(FrozenModel):
    """One harness × model pair of a sweep over several executors, and its shards."""

    harness: str
    """The ``--executor`` value."""
    model: str
    """An executor model it can run."""
    shards: int
    """Its shards over every corpus, epoch and arm."""


class SkippedCorpus(FrozenModel):
    """A corpus left out of the plan, with its named error."""

    corpus: str
    """The corpus file."""
    error: str
    """``<STATUS>: <detail>``."""


class PlanSummary(FrozenModel):
    """The plan as one JSON object: per corpus cases and assertions, totals, shard count."""

    version: Literal[1] = 1
    """Format version of this record."""
    run_id: str
    corpora: list[CorpusPlan]
    models: list[str]
    """Executor models."""
    judges: list[str]
    epochs: int
    variants: list[str]
    """``current`` and, with --compare, ``baseline:<ref>``."""
    totals: PlanTotals
    skipped: list[SkippedCorpus] = Field(default_factory=list)
    """Corpora left out (only with --all-evals; otherwise the first bad corpus blocks the run)."""
    power: list[str] = Field(default_factory=list)
    """What this many cases can detect in a paired comparison (printed by --dry-run)."""
    adaptive: AdaptivePlan | None = None
    """``--epochs auto``: the rule (``epochs`` and ``totals.shards`` are then the first round's)."""
    max_shards: int | None = None
    """``--epochs auto``: the shards if every case went on to ``--max-epochs``."""
    guards: list[str] = Field(default_factory=list)
    """What the run would block per case or skip per skill, by name (``BLOCKED_FIXTURE_NEEDS_GIT``,
    ``GUARD_BAD_REF``, ``GUARD_NO_GIT``): the dry run's exit code stays as it is; the run goes on
    with the rest and ends WARN for a skipped comparison."""
    pairs: list[HarnessPair] = Field(default_factory=list)
    """A sweep over several executors: each harness × model pair and its shards (empty: one executor)."""


class RunStatus(FrozenModel):
    """A run's progress: shard counts by state, whether it is reduced, model usage."""

    version: Literal[1] = 1
    """Format version of this record."""
    run_id: str
    source: Literal["broker", "store"]
    """Where the counts come from: live Redis state, or the stored outcomes after the broker is gone."""
    total: int
    """Shards of the run."""
    states: dict[str, int]
    """Shard state (the contract's strings) -> count; every state is listed."""
    done: bool
    """The run is reduced (its result is stored)."""
    terminal: int
    """Shards in a terminal state."""
    usage: dict[str, dict[str, int | float | None]] = Field(default_factory=dict)
    """Model -> counters (calls, tokens, cost_usd, ...)."""
    waiting: int = 0
    """Shards waiting for a message (queued, executed) that no worker holds (from the broker only)."""
    waiting_oldest_s: float | None = None
    """Seconds since the oldest of them was sent (None: none waits)."""
    in_flight: int = 0
    """Shards a worker holds a live lease on (one not yet expired)."""
    lease_expired: int = 0
    """Shards whose lease expired: their worker is gone, and they wait for the fleet's reaper to
    send them again (from the broker only)."""
    idle_s: float | None = None
    """Seconds since a shard of the run was last claimed or moved (None: never, or not known)."""
    stalled: bool = False
    """Shards wait (or hold an expired lease), none is in flight, and nothing moved for longer than
    ``stall_after_s``: the run
    cannot finish by itself (no worker takes its messages, or the fleet's reaper is not running)."""
    stall_after_s: float | None = None
    """The bound the run is held to: the delivery ledger's re-send bound plus three reaper periods."""
    not_ended: int = 0
    """Shards the store holds no terminal record for (from the store only): queued, executing or
    lost, which the store alone cannot tell apart, so no state in ``states`` counts them."""
    not_sent: int = 0
    """Shards never sent, because the run's checks refused it before dispatch (its end is
    ``blocked``): not queued, for nothing will ever run them."""
    end: RunEnd | None = None
    """How the run ended without a result (refused by its checks, or its embedded run stopped);
    None: it is reduced, or it may still be going."""
    lost_by: str | None = None
    """The broker given (its URL, password hidden) when it answered that it does not know the run:
    lost with its data, or expired. Nothing runs the run then; None: no broker was asked, or it
    knows the run."""
