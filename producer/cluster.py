"""Where a run's tasks go: the given broker, or an embedded one-host cluster started for the run."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

from engine.settings import Settings
from producer.embedded import EmbeddedCluster
from schemas.manifest import RunManifest

Send = Callable[[str, str, str | None], None]
"""send(kind, run_id, shard_id or None): put one execute, grade or reduce message on its queue."""


@contextlib.contextmanager
def open_cluster(settings: Settings, workers: int) -> Iterator[tuple[Settings, EmbeddedCluster | None]]:
    """The broker to use: the given one, or an embedded cluster started (and stopped) here."""
    if settings.broker_url:
        yield settings, None
        return
    with _termination_unwinds(), EmbeddedCluster(settings, workers=workers) as embedded:
        yield embedded.settings, embedded


@contextlib.contextmanager
def _termination_unwinds() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into SystemExit while the embedded cluster runs.

    Python's default for them ends the process on the spot, skipping every ``finally``: a
    cancelled CI job or a closed terminal would leave the private redis-server and the
    worker processes running for good. Unwinding lets the cluster stop them.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def unwind(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, unwind) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def task_sender(settings: Settings, manifest: RunManifest) -> Send:
    """Send ids-only messages to the run's broker, with the run's per-task time limits.

    The one place the producer imports the worker room: the Celery app names the tasks and
    their time limits, and sending a message needs both.
    """
    from worker.app import TASK_NAMES, make_app, time_limits

    app = make_app(settings)

    def send(kind: str, run_id: str, shard_id: str | None) -> None:
        soft, hard = time_limits(manifest, kind)
        args = [run_id] if shard_id is None else [run_id, shard_id]
        app.send_task(TASK_NAMES[kind], args=args, queue=kind, soft_time_limit=soft, time_limit=hard)

    return send
