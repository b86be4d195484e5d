"""A recorded conversation a case continues: the turns before the case's prompt. Pure model.

The executor starts with these turns as if they had happened, then gets the case's prompt as the
next user message; only what the agent does after them is its trajectory and is judged.
"""

from __future__ import annotations

from typing import Literal

from schemas.base import FrozenModel


class HistoryTurn(FrozenModel):
    """One earlier message of the conversation."""

    role: Literal["user", "assistant"]
    content: str
