"""The base of the schemas' records: strict about their fields and immutable once built."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    """A record that refuses unknown fields and cannot be changed once built: a corpus, a plan,
    a shard's outcome, a result. Its subclasses inherit the configuration (pydantic merges it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
