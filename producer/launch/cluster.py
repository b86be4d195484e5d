"""Where a run's tasks go: the given broker, or an embedded one-host cluster started for the run."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from engine.broker import Broker
from engine.settings import Settings
from producer.launch.embedded import EmbeddedCluster
from schemas.manifest import RunManifest


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


def task_sender(settings: Settings, manifest: RunManifest | None) -> Broker:
    """The run's broker: its messages carry the run's per-task time limits.

    The one place the producer imports the worker room: the Celery app names the tasks and
    their time limits, and sending a message needs both.
    """
    from worker.app import CeleryBroker, make_app

    return CeleryBroker(make_app(settings), lambda _run_id: manifest)
