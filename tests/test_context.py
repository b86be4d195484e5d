"""Per-process resources shared by a worker's threads: built once, bounded."""

from __future__ import annotations

import threading
from collections import OrderedDict

from worker import context as ctxmod
from worker.context import RUNS_KEPT, remember_recent


def test_a_long_lived_worker_keeps_only_its_most_recent_runs() -> None:
    cache: OrderedDict[str, int] = OrderedDict()
    made: list[str] = []

    def make(key: str) -> int:
        made.append(key)
        return len(made)

    for i in range(RUNS_KEPT):
        remember_recent(cache, f"run-{i}", lambda i=i: make(f"run-{i}"))
    assert remember_recent(cache, "run-0", lambda: make("again")) == 1  # a hit, and now the most recent
    remember_recent(cache, "run-new", lambda: make("run-new"))
    assert len(cache) == RUNS_KEPT
    assert "run-1" not in cache and "run-0" in cache  # the least recently used one went
    assert "again" not in made


def test_threads_asking_at_once_share_one_context() -> None:
    ctxmod.reset_context()
    seen: list[object] = []
    barrier = threading.Barrier(8)

    def ask() -> None:
        barrier.wait()
        seen.append(ctxmod.context())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    ctxmod.reset_context()
    assert len(seen) == 8 and len({id(c) for c in seen}) == 1
