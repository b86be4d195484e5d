"""Worker start-up: import the heavy modules once per process, off the first shard's path.

litellm alone costs seconds of CPU to import. With shards on threads (docs/design/engine.md) a
worker process imports it once, in a background thread started as the worker boots, while
Celery connects to the broker; a shard that needs one of these modules before the thread is
done simply waits on Python's import lock.
"""

from __future__ import annotations

import gc
import importlib
import threading

HEAVY_MODULES = ("worker.models.client", "worker.executor.agent", "worker.grading.judge", "worker.workspace")


def import_heavy_modules() -> None:
    """Import HEAVY_MODULES with the cyclic GC paused, then freeze what they built.

    An import allocates hundreds of thousands of long-lived objects, and every collection on the
    way walks all of them again: pausing the collector cuts litellm's import CPU by about a
    quarter. Freezing moves them out of the collector's sight for the life of the process, so
    later collections during shards stay cheap.
    """
    gc.disable()
    try:
        for name in HEAVY_MODULES:
            importlib.import_module(name)
    finally:
        gc.enable()
    gc.freeze()


def start_warmup() -> threading.Thread:
    """Run :func:`import_heavy_modules` in a daemon thread; the thread."""
    thread = threading.Thread(target=import_heavy_modules, name="import-heavy-modules", daemon=True)
    thread.start()
    return thread
