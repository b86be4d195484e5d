"""Where a run's tasks go: the given broker, or an embedded one-host cluster started for the run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from engine.broker import Broker
from engine.settings import Settings
from producer.launch.embedded import EmbeddedCluster
from producer.launch.stopped import termination_unwinds
from schemas.manifest import RunManifest


@contextlib.contextmanager
def open_cluster(settings: Settings, workers: int) -> Iterator[tuple[Settings, EmbeddedCluster | None]]:
    """The broker to use: the given one, or an embedded cluster started (and stopped) here. SIGTERM and
    SIGHUP unwind while it is open, as Ctrl-C does (producer/launch/stopped.py)."""
    with termination_unwinds():
        if settings.broker_url:
            yield settings, None
            return
        with EmbeddedCluster(settings, workers=workers) as embedded:
            yield embedded.settings, embedded


def task_sender(settings: Settings, manifest: RunManifest | None) -> Broker:
    """The run's broker: its messages carry the run's per-task time limits.

    The one place the producer imports the worker room: the Celery app names the tasks and
    their time limits, and sending a message needs both.
    """
    from worker.app import CeleryBroker, make_app

    return CeleryBroker(make_app(settings), lambda _run_id: manifest)
