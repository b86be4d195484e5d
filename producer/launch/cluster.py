"""Where a run's tasks go: the given broker, or an embedded one-host cluster started for the run."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from engine.settings import Settings
from producer.launch.embedded import EmbeddedCluster
from producer.launch.submit import PUBLISH_BATCH
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


class _Unread:
    """What ``send_task`` hands back to a sender that never reads a task's result."""

    __slots__ = ("id", "ignored")

    def __init__(self, task_id: str) -> None:
        self.id = task_id


HOST_CHECK_LIMIT_S = 3600
"""A host check's hard time limit: a harness's canary runs once per model, up to 300 s each."""

_NO_RESULT: dict[str, Any] = {"ignore_result": True, "result_cls": _Unread}
"""Tasks report through the run's own Redis keys (engine/state.py), never a result backend, so a
send does not make Celery find one: resolving it reads every installed package's metadata for
backend plugins (tens of milliseconds) on the command's first send, the run's preflight."""


class Publisher:
    """Sends ids-only messages to the run's broker, with the run's per-task time limits.

    The one place the producer imports the worker room: the Celery app names the tasks and
    their time limits, and sending a message needs both. Called as ``publisher(kind, run_id,
    shard_id)``, it is a :data:`Send`. Inside :meth:`batch` the messages share one broker
    connection and go out together when the block ends (kombu's publish batch: one pipelined
    round trip instead of a client and a round trip per message); each stays its own message,
    acked on its own by the worker that runs it.
    """

    def __init__(self, settings: Settings, manifest: RunManifest) -> None:
        from worker.app import make_app

        self._app = make_app(settings)
        self._manifest = manifest
        self._producer: Any = None

    def __call__(self, kind: str, run_id: str, shard_id: str | None) -> None:
        from worker.app import TASK_NAMES, time_limits

        soft, hard = time_limits(self._manifest, kind)
        args = [run_id] if shard_id is None else [run_id, shard_id]
        self._app.send_task(
            TASK_NAMES[kind],
            args=args,
            queue=kind,
            soft_time_limit=soft,
            time_limit=hard,
            producer=self._producer,
            # The ids are the whole message; Celery would otherwise repr them again into headers.
            argsrepr="",
            kwargsrepr="",
            **_NO_RESULT,
        )

    def preflight(self, run_id: str, queue: str) -> None:
        """Ask a worker of ``queue`` to check this run's models (see producer/launch/preflight.py)."""
        from worker.app import TASK_PREFLIGHT

        self._app.send_task(
            TASK_PREFLIGHT, args=[run_id, queue], queue=queue, time_limit=600, soft_time_limit=540, **_NO_RESULT
        )

    def host_check(self, run_id: str) -> None:
        """Ask an execute worker to check its host for this run (see producer/launch/preflight.py)."""
        from worker.app import TASK_HOST_CHECK

        limit = HOST_CHECK_LIMIT_S
        self._app.send_task(
            TASK_HOST_CHECK, args=[run_id], queue="execute", time_limit=limit, soft_time_limit=limit - 60, **_NO_RESULT
        )

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        with self._app.producer_or_acquire() as producer, producer.batch(max_size=PUBLISH_BATCH):
            self._producer = producer
            try:
                yield
            finally:
                self._producer = None


def task_sender(settings: Settings, manifest: RunManifest) -> Publisher:
    """A :class:`Publisher` for the run's broker."""
    return Publisher(settings, manifest)
