"""A person's review of one judge verdict, and the agreement figures drawn from many of them.

A label is a record in the store, never overwritten: a reviewer who changes their mind adds a
newer record, and the newest record of each (shard, assertion, reviewer) is the one that counts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import Field

from schemas.base import FrozenModel

COMBINED = "combined"
"""The ``judge`` of a label given on the combined verdict (the ensemble's majority) rather than one judge's answer."""

NOTE_CHARS = 2000
"""Longest note a label keeps."""


class HumanLabel(FrozenModel):
    """One reviewer's agree or disagree on one verdict of one shard."""

    version: Literal[1] = 1
    """Format version of this record."""
    run_id: str
    """Run the verdict belongs to."""
    shard_id: str
    """Shard graded."""
    assertion: int = Field(ge=0)
    """Position of the assertion in the case (0-based; the CLI counts from 1)."""
    assertion_text: str = ""
    """The assertion as the reviewer saw it."""
    judge: str
    """The judge whose answer was reviewed, or ``combined`` for the combined verdict."""
    judge_passed: bool
    """The answer the reviewer saw: whether that judge said the assertion passed."""
    agree: bool
    """Whether the reviewer agrees with that answer."""
    note: str = Field(default="", max_length=NOTE_CHARS)
    """Why, in the reviewer's words."""
    reviewer: str
    """Who labelled."""
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When (UTC)."""

    @property
    def human_passed(self) -> bool:
        """What the reviewer holds the truth to be."""
        return self.judge_passed if self.agree else not self.judge_passed


class Agreement(FrozenModel):
    """How one judge's verdicts agree with the people's, over the labelled assertions of a scope."""

    judge: str
    """Judge model."""
    scope: str
    """``all`` or one assertion (``<skill> case <id> #<n>: <text>``)."""
    n: int
    """Labelled verdicts compared."""
    agreed: int
    """Of them, where the judge and the people gave the same verdict."""
    raw: float | None
    """agreed / n; None with no label."""
    kappa: float | None
    """Cohen's kappa; None while it is undefined (see ``kappa_note``)."""
    kappa_note: str = ""
    """Why kappa is undefined, when it is."""
    judge_passes: int = 0
    """Verdicts the judge passed."""
    human_passes: int = 0
    """Verdicts the people passed."""
