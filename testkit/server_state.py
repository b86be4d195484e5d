"""What the offline model server's handlers share: the scenario, the recorded requests, the stats,
the fault and pick counters, and its requests-per-minute ceiling."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from testkit.scenario import Scenario

MAX_RECORDED = 2000


class RateWindow:
    """A sliding-window ceiling: at most ``limit`` accepted requests in any ``window_s`` seconds.

    ``rpm`` is spread over the window (``limit = rpm * window_s / 60``) because providers
    enforce per-minute limits at sub-minute granularity; a full-minute window would let a
    whole minute's budget through in one burst.
    """

    def __init__(self, rpm: int, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self.limit = max(1, round(rpm * window_s / 60))
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def admit(self) -> float | None:
        """Record and admit a request (None), or return the seconds until one may be admitted."""
        now = time.monotonic()
        with self._lock:
            while self._times and self._times[0] <= now - self.window_s:
                self._times.popleft()
            if len(self._times) < self.limit:
                self._times.append(now)
                return None
            return self._times[0] + self.window_s - now


class ServerState:
    """Everything the handlers share; guarded by one lock."""

    def __init__(self, scenario: Scenario, rpm: int | None, window_s: float) -> None:
        self.lock = threading.Lock()
        self.scenario = scenario
        self.window = RateWindow(rpm, window_s) if rpm else None
        self.stopping = threading.Event()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.requests: deque[dict[str, Any]] = deque(maxlen=MAX_RECORDED)
            self.keys: deque[str] = deque(maxlen=MAX_RECORDED)
            """The credential header of each model request, in order (x-api-key or Authorization)."""
            self.headers: deque[dict[str, str]] = deque(maxlen=MAX_RECORDED)
            """Every header of each model request, names lower-cased (what a proxy let through)."""
            self.timeline: deque[tuple[float, float, str]] = deque(maxlen=MAX_RECORDED)
            """(arrived, replied, model) of each successful model call, wall-clock seconds: benchmarks
            and tests read it to see how many calls were in flight when."""
            self.fault_counts: dict[tuple[int, int, str], int] = {}
            self.pick_counts: dict[tuple[int, int, str], int] = {}
            self.stats: dict[str, Any] = {
                "total": 0,
                "ok": 0,
                "rate_limited": 0,
                "ceiling_rate_limited": 0,
                "errors": 0,
                "hangs": 0,
                "malformed": 0,
                "first_request_at": None,
                "first_ok_at": None,
                "last_ok_at": None,
            }
            self.seq = 0
