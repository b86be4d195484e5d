"""Counts in words, for every message that names a number of things. Pure.

``plural(1, "query")`` is ``1 query``, ``plural(2, "query")`` is ``2 queries``: a message never
reads ``1 queries`` nor hedges with ``query(s)``.
"""

from __future__ import annotations

_IRREGULAR = {"match": "matches", "child": "children", "epoch": "epochs", "corpus": "corpora"}
"""Plurals the rules below would get wrong (a hard "ch", a Latin plural)."""


def noun(count: int, word: str) -> str:
    """``word`` as it reads after ``count``: singular for one, plural otherwise."""
    if count == 1:
        return word
    head, _, last = word.rpartition(" ")
    lead = f"{head} " if head else ""
    if last in _IRREGULAR:
        return lead + _IRREGULAR[last]
    if last.endswith("y") and last[-2:-1] not in ("a", "e", "i", "o", "u"):
        return lead + last[:-1] + "ies"
    if last.endswith(("s", "x", "sh", "ch")):
        return lead + last + "es"
    return lead + last + "s"


def plural(count: int, word: str) -> str:
    """``<count> <word>`` in the number ``count`` calls for: ``1 query``, ``3 queries``."""
    return f"{count} {noun(count, word)}"


def times(count: int) -> str:
    """How often, in words: ``once``, ``twice``, ``3 times``."""
    return {1: "once", 2: "twice"}.get(count, plural(count, "time"))


def count_bound(low: int, high: int | None) -> str:
    """The range ``[low, high]`` of a counted check as its text says it (``high`` None: no upper
    bound): ``never``, ``exactly once``, ``at most twice``, ``1 to 3 times``, ``at least once``."""
    if high == 0:
        return "never"
    if high is None:
        return f"at least {times(low)}"
    if low == high:
        return f"exactly {times(low)}"
    if low == 0:
        return f"at most {times(high)}"
    return f"{low} to {high} times"
