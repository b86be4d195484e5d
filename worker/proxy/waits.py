"""The time a harness was held up by the fleet, not by itself: what its wall clock moves out by.

A proxy counts its requests waiting in the fleet's limiter and being answered, and the
harness's sleeps before retrying a call the upstream failed; the stretches when some request
waited (or the harness slept) and none was being answered are the fleet's time.
"""

from __future__ import annotations

import threading
import time

from schemas.manifest import FLEET_WAIT_ALLOWANCE_S
from worker.proxy.replies import UNHINTED_BACKOFF_S

__all__ = ["UNHINTED_BACKOFF_S", "FleetWaits"]


class FleetWaits:
    """The waits of one proxy, under its lock (re-entrant: the proxy reads them under it too)."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._waited_s = 0.0
        self._waiting = 0
        self._answering = 0
        self._blocked_since: float | None = None
        self._backoff_until: float | None = None
        """While set, the harness is sleeping before its retry of a call the upstream failed."""

    @property
    def waited_s(self) -> float:
        """Seconds the harness was held up by the fleet: some request of it waiting in the limiter
        (a slot, the pace, a 429's cool-down), or sleeping before it retries a call the upstream
        rate-limited or failed (until its next request, at most the Retry-After it was given, else
        ``UNHINTED_BACKOFF_S``), and none being answered. Intervals, not a sum per request, so
        parallel requests count once, and not while any answer is on its way. Not the agent's
        time: the shard's wall clock, here and in the sandbox, moves out by it (``allowance_s``)."""
        with self._lock:
            now = time.monotonic()
            self._end_backoff_by(now)
            ongoing = now - self._blocked_since if self._blocked_since is not None else 0.0
            return self._waited_s + ongoing

    def allowance_s(self) -> float:
        """What the wall clock moves out by: the fleet's waits, up to ``FLEET_WAIT_ALLOWANCE_S``."""
        return min(self.waited_s, FLEET_WAIT_ALLOWANCE_S)

    def _note(
        self, *, waiting: int = 0, answering: int = 0, came_back: bool = False, backoff_s: float | None = None
    ) -> None:
        """Count requests waiting in the limiter and being answered, and the harness's sleeps before
        a retry (``backoff_s``: a failed reply sent; ``came_back``: its next request is here); time
        the stretches the harness was held up."""
        with self._lock:
            now = time.monotonic()
            self._end_backoff_by(now)
            if came_back:
                self._backoff_until = None
            if backoff_s is not None:
                self._backoff_until = max(self._backoff_until or now, now + backoff_s)
            self._waiting += waiting
            self._answering += answering
            self._blocked_at(now)

    def _blocked_at(self, at: float) -> None:
        blocked = (self._waiting > 0 or self._backoff_until is not None) and self._answering == 0
        if blocked and self._blocked_since is None:
            self._blocked_since = at
        elif not blocked and self._blocked_since is not None:
            self._waited_s += max(0.0, at - self._blocked_since)
            self._blocked_since = None

    def _end_backoff_by(self, now: float) -> None:
        """A retry sleep that ran out before ``now`` ended when it ran out: the harness's time since is its own."""
        if self._backoff_until is not None and self._backoff_until <= now:
            at = self._backoff_until
            self._backoff_until = None
            self._blocked_at(at)
