"""The records a shard's end and a judge's calibration leave in the store."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import Field

from schemas.base import FrozenModel
from schemas.status import ShardState


class ShardOutcomeRecord(FrozenModel):
    """How a shard ended; committed under its attempt (``attempt_key``, first writer wins) and
    copied to ``outcome_key`` before its terminal transition.

    Authoritative for reports: the copy at ``outcome_key`` is the latest attempt's, and a
    stored grade is only used when its state matches this one (it may be left over from an
    earlier attempt).
    """

    version: Literal[1] = 1
    """Format version of this record."""
    state: ShardState
    """The terminal state (graded, blocked, or an infra failure)."""
    detail: str = ""
    """``<STATUS>: <detail>`` of the error that ended the shard; empty when graded cleanly."""
    status: str = ""
    """The named status of that error (``BLOCKED_NO_ISOLATION``, ``executor-failed``, ...)."""
    stops_run: bool = False
    """A blocked shard whose status stops the whole run (the error's ``stops_run``): BLOCKED, not WARN."""


class CalibrationStatus(str, Enum):
    """What a judge's calibration came to."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"
    """--no-calibration: not asked for (reported, no warning)."""
    MISSING = "missing"
    """Asked for, but no result was recorded (the run WARNs)."""


class CalibrationRecord(FrozenModel):
    """One judge's calibration result for a run; stored at ``calibration_key``."""

    version: Literal[1] = 1
    """Format version of this record."""
    judge: str
    """The judge model."""
    status: CalibrationStatus
    """ok, or failed (with ``details``)."""
    details: list[str] = Field(default_factory=list)
    """Which calibration trajectories the judge got wrong, and how."""

    def describe(self) -> str:
        """The line the reports show: ``ok``, ``failed: <details>`` or why it was not calibrated."""
        if self.status is CalibrationStatus.FAILED:
            return "failed: " + "; ".join(self.details)
        if self.status is CalibrationStatus.SKIPPED:
            return "not calibrated (--no-calibration)"
        if self.status is CalibrationStatus.MISSING:
            return "not calibrated (no result recorded)"
        return "ok"


class OutcomeLine(FrozenModel):
    """One shard's end in the few hundred bytes a reduce needs: a line of an outcome segment.

    Written by the worker that ends the shard, beside the full records (outcome, grade,
    trajectory), so that a run of a million shards reduces by streaming a few hundred segment
    objects instead of reading three records per shard. Everything here is derived from those
    records; they stay the authority a segment can be rebuilt from.
    """

    version: Literal[1] = 1
    """Format version of this line."""
    shard_id: str
    variant: str
    skill: str
    case_id: int
    model: str
    epoch: int
    state: ShardState
    harness: str | None = None
    """The shard's harness in a sweep over several executors (None: the run's one executor)."""
    status: str = ""
    detail: str = ""
    """Why a shard that was not graded ended (cut to ``LINE_DETAIL_CHARS``); empty when graded."""
    stops_run: bool = False
    passed: list[bool] = Field(default_factory=list)
    """Each assertion's verdict, in corpus order (graded shards only)."""
    weights: list[float] = Field(default_factory=list)
    """The verdicts' weights; empty when every weight is 1."""
    judged: list[bool] = Field(default_factory=list)
    """Per verdict: decided by the judge (not a deterministic check); empty when all are."""
    disagreed: list[int] = Field(default_factory=list)
    """Per verdict: 1 when an ensemble's graded judges disagreed, 0 when they agreed, -1 when not
    an ensemble question; empty when no verdict was asked of more than one graded judge."""
    verified: tuple[int, int] = (0, 0)
    """(passed verdicts whose evidence was verified, passed verdicts whose evidence was checked)."""
    agreement: tuple[float, int] = (0.0, 0)
    """(sum, count) of the judge pairs' agreement shares."""
    unanimous: float | None = None
    usage: tuple[int, int, int, float | None] = (0, 0, 0, None)
    """The executor's (prompt tokens, completion tokens, calls, cost in USD or None)."""
    judge_usage: dict[str, tuple[int, int, int, float | None]] = Field(default_factory=dict)
    """Judge -> its usage on this shard, same tuple."""
    sandbox: str | None = None
    end_reason: str = ""
    template_hashes: dict[str, str] = Field(default_factory=dict)
    """Prompt templates the executor and the judges used (name -> hash)."""
    skill_activated: bool | None = None
    rejected_calls: int = 0
    skills_fired: list[str] | None = None
    """Trigger runs: the skills activated, in order (None: not a trigger run)."""


LINE_DETAIL_CHARS = 500
"""How much of a not-graded shard's detail its outcome line keeps (the outcome record keeps all)."""
