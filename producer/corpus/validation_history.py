"""Validation of a case's ``history`` (schemas/history.py). Pure; called from producer/corpus/validation.py.

The turns must read as a conversation every chat API accepts before one more user message: they
open with the user, alternate, and close with the assistant.
"""

from __future__ import annotations

from typing import Any

from producer.corpus.validation_plugin import Fail
from schemas.history import HistoryTurn

MAX_TURNS = 200
MAX_CHARS = 200_000
"""All turns together, in characters."""


def case_history(raw: Any, at: str, fail: Fail) -> tuple[HistoryTurn, ...]:
    """A case's ``history``: ``[{"role": "user"|"assistant", "content": text}, ...]``."""
    if not isinstance(raw, list) or not 0 < len(raw) <= MAX_TURNS:
        raise fail(at, f"must be an array of 1 to {MAX_TURNS} turns")
    turns: list[HistoryTurn] = []
    for i, item in enumerate(raw):
        where = f"{at}[{i}]"
        if not isinstance(item, dict) or set(item) != {"role", "content"}:
            raise fail(where, 'must be an object with exactly "role" and "content"')
        expected = "user" if i % 2 == 0 else "assistant"
        if item["role"] != expected:
            raise fail(
                f"{where}.role", f"{item['role']!r}: the turns alternate from the user's, so this is {expected!r}"
            )
        if not isinstance(item["content"], str) or not item["content"].strip() or "\x00" in item["content"]:
            raise fail(f"{where}.content", "must be non-blank text")
        turns.append(HistoryTurn(role=item["role"], content=item["content"]))
    if turns[-1].role != "assistant":
        raise fail(
            f"{at}[{len(turns) - 1}]", "the last turn is the assistant's: the case's prompt is the next user turn"
        )
    if sum(len(t.content) for t in turns) > MAX_CHARS:
        raise fail(at, f"holds more than {MAX_CHARS} characters")
    return tuple(turns)
