"""How a run ended without a result: refused before anything was sent, or stopped while it ran.

A run's manifest is stored before its checks (the checking workers read the run from it), so a
run the checks refuse is in the store all the same. Without this record it would read as a run
still going: no result, every shard queued. Stored at ``runs/<run_id>/end.json``; a result, when
there is one (``skill-eval report`` on a stopped run), says more and is read first.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import Field

from schemas.base import FrozenModel

RunEndKind = Literal["blocked", "interrupted"]


class RunEnd(FrozenModel):
    """A run that will never be reduced by the command that started it."""

    version: Literal[1] = 1
    """Format version of this record."""
    run_id: str
    """Run id."""
    how: RunEndKind
    """``blocked``: a check refused the run before any shard was sent (the verdict is BLOCKED);
    ``interrupted``: the command running it on its own embedded cluster stopped before the run
    finished (Ctrl-C, its workers gone), and nothing runs it any more."""
    reason: str
    """The named error, ``<STATUS>: <detail>``, or what stopped it."""
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When it ended."""

    @property
    def label(self) -> str:
        """``BLOCKED`` or ``interrupted``: the word status and the viewer show for the run."""
        return "BLOCKED" if self.how == "blocked" else "interrupted"
