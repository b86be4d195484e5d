"""The records a shard's end and a judge's calibration leave in the store."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.status import ShardState


class ShardOutcomeRecord(BaseModel):
    """How a shard ended; stored at ``outcome_key`` before its terminal transition.

    Authoritative for reports: a re-run overwrites it, and a stored grade is only used when
    its state matches this one (it may be left over from an earlier attempt).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

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


class CalibrationRecord(BaseModel):
    """One judge's calibration result for a run; stored at ``calibration_key``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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
