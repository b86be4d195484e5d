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
