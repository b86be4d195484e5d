"""What every assertion object has in common: its ``kind``, its text and its weight.

Each check narrows ``kind`` to its own literal (the discriminator of ``schemas.corpus.Assertion``)
and adds the fields it matches on; pydantic keeps an overridden field at its first place, so a
check's fields read ``kind``, ``text``, ``weight``, then its own.
"""

from __future__ import annotations

from schemas.base import FrozenModel


class Check(FrozenModel):
    """An assertion written as an object (extension ``deterministic-assertions``)."""

    kind: str
    """Which check this is; every subclass narrows it to one literal."""
    text: str
    """What the check means, as reports show it."""
    weight: float = 1.0
    """Relative weight in weighted scores."""


class CountedCheck(Check):
    """A check that counts what matches and passes when the count lies in ``[min, max]``."""

    min: int = 1
    """Fewest matches allowed (the corpus loader refuses a negative count)."""
    max: int | None = None
    """Most matches allowed; None: no upper bound (the corpus loader refuses one below ``min``)."""

    def admits(self, count: int) -> bool:
        return count >= self.min and (self.max is None or count <= self.max)

    def allowed(self) -> str:
        """The range in the words evidence uses: ``exactly 0``, ``1 to 3``, ``at least 1``."""
        if self.max is None:
            return f"at least {self.min}"
        return f"exactly {self.min}" if self.min == self.max else f"{self.min} to {self.max}"
