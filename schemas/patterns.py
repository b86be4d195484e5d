"""A corpus's regular expressions, matched against what the agent made in bounded time.

Check patterns, mock URL matchers and mock input expectations are the corpus author's; the text
they run over (tool-call arguments, final files, request URLs and bodies) is the agent's. Python's
``re`` backtracks without limit: ``(a+)+$`` over 34 ``a`` and a ``!`` takes about half an hour and
holds the GIL, so one request froze a worker past its shard's timeout. These run on the ``regex``
module, which accepts the same syntax, gives up after :data:`MATCH_TIMEOUT_S` and lets other
threads run meanwhile; a match that gives up raises :class:`PatternTimeout`, and each caller
decides against the agent (a check fails, a request or call is unexpected), never for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import regex

MATCH_TIMEOUT_S = 1.0
"""How long one match may run; the module looks at the clock only now and then, so a match that
gives up may have run a few times this on a busy machine (still bounded)."""

_FLAGS = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL}


class PatternTimeout(Exception):
    """A corpus pattern gave up on the agent's text; ``pattern`` names it."""

    def __init__(self, pattern: str) -> None:
        super().__init__(f"/{pattern}/ gave up after {MATCH_TIMEOUT_S:g} s on the run's text")
        self.pattern = pattern


class Bounded:
    """One compiled corpus pattern (its flags ``i``, ``m``, ``s``) whose matches are bounded in time."""

    def __init__(self, pattern: str, flags: str = "") -> None:
        value = regex.VERSION0
        for flag in flags:
            value |= _FLAGS.get(flag, 0)
        self.pattern = pattern
        self._compiled = regex.compile(pattern, value)

    def search(self, text: str) -> regex.Match[str] | None:
        try:
            return self._compiled.search(text, timeout=MATCH_TIMEOUT_S, concurrent=True)
        except TimeoutError:
            raise PatternTimeout(self.pattern) from None

    def finditer(self, text: str) -> Iterator[regex.Match[str]]:
        try:
            yield from self._compiled.finditer(text, timeout=MATCH_TIMEOUT_S, concurrent=True)
        except TimeoutError:
            raise PatternTimeout(self.pattern) from None


@cache
def bounded(pattern: str, flags: str = "") -> Bounded:
    """``pattern`` compiled once per process."""
    return Bounded(pattern, flags)
