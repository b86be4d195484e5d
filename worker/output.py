"""Bounded capture of a command's output: head and tail kept, the middle counted and elided.

A sandboxed command may print gigabytes; the worker keeps at most ``max_chars`` characters
in memory whatever the command does, and says exactly how much it left out.
"""

from __future__ import annotations

import codecs
from collections import deque

from schemas.event_bounds import ELISION_MARKER


class OutputBuffer:
    """Feed bytes as they arrive; ``render`` returns the kept text and whether it was elided."""

    def __init__(self, max_chars: int, watch: tuple[str, ...] = ()) -> None:
        self._head_cap = max(max_chars // 2, 0)
        self._tail_cap = max(max_chars - self._head_cap, 0)
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.total_chars = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        # Phrases looked for in the whole stream (also the elided middle), e.g. errno texts
        # that tell which resource limit a command ran into.
        self._watch = watch
        self._carry = ""
        self.seen: set[str] = set()

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        if not text:
            return
        self.total_chars += len(text)
        if self._watch:
            window = self._carry + text
            self.seen.update(w for w in self._watch if w not in self.seen and w in window)
            self._carry = window[-64:]
        if self._head_len < self._head_cap:
            take = text[: self._head_cap - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            text = text[len(take) :]
        if text and self._tail_cap:
            self._tail.append(text)
            self._tail_len += len(text)
            while self._tail and self._tail_len - len(self._tail[0]) >= self._tail_cap:
                self._tail_len -= len(self._tail.popleft())

    def render(self) -> tuple[str, bool]:
        """Return ``(text, truncated)``; a truncated text carries ``... [N chars elided] ...``."""
        self.feed(b"", final=True)
        head = "".join(self._head)
        tail = "".join(self._tail)
        if len(tail) > self._tail_cap:
            tail = tail[len(tail) - self._tail_cap :]
        elided = self.total_chars - len(head) - len(tail)
        if elided > 0:
            return head + ELISION_MARKER.format(n=elided) + tail, True
        return head + tail, False
