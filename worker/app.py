"""The Celery app. Settings chosen for long, expensive, idempotent tasks (docs/design/engine.md).

- the threads pool: a shard mostly waits (model calls, sandbox subprocesses), so one process
  runs ``-c N`` shards on N threads, importing litellm once (producer/launch/embedded.py);
- late acks: a message is acked after its task ran. A worker process that dies takes its
  in-flight shards with it; their leases lapse and the reaper re-queues them (engine/state.py).
  ``task_reject_on_worker_lost`` only matters to a prefork pool and is kept for one;
- prefetch multiplier one: Celery reserves ``multiplier x concurrency`` messages, so with N
  threads a worker holds exactly the N it runs; queue depth (what autoscalers read) is the real
  backlog and a slow shard never strands others behind it;
- deadlines: the threads pool ignores Celery's time limits, so the tasks enforce their own
  (worker/deadline.py); ``time_limits`` still rides on each message for a prefork pool;
- no result backend: shard state lives in our own Redis keys (engine/state.py), and runs
  finish through an atomic counter rather than chords.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from celery import Celery
from celery.loaders.app import AppLoader
from kombu import Exchange, Queue  # type: ignore[attr-defined]  # kombu re-exports without __all__

from engine.broker import PUBLISH_BATCH
from engine.settings import Settings
from schemas.constants import ALL_QUEUES, QUEUE_EXECUTE, QUEUE_GRADE, QUEUE_REDUCE
from schemas.manifest import EXECUTE_MARGIN_S, RunManifest

__all__ = [
    "TASK_EXECUTE",
    "TASK_GRADE",
    "TASK_HOST_CHECK",
    "TASK_NAMES",
    "TASK_PREFLIGHT",
    "TASK_REDUCE",
    "CeleryBroker",
    "app",
    "make_app",
    "time_limits",
]

TASK_EXECUTE = "skill_eval.execute"
TASK_GRADE = "skill_eval.grade"
TASK_REDUCE = "skill_eval.reduce"
TASK_PREFLIGHT = "skill_eval.preflight"
"""Sent to whichever queue must check its models; not routed by name."""
TASK_HOST_CHECK = "skill_eval.host_check"
"""Sent to the execute queue: the sandbox and the executor's canary on an execute worker's host."""
HOST_CHECK_LIMIT_S = 3600
"""A host check's hard time limit: a harness's canary runs once per model, up to 300 s each."""
TASK_NAMES = {QUEUE_EXECUTE: TASK_EXECUTE, QUEUE_GRADE: TASK_GRADE, QUEUE_REDUCE: TASK_REDUCE}


HARD_GRACE_S = 60.0
"""How long past the soft deadline a shard's thread may take to unwind before it is abandoned."""


def time_limits(manifest: RunManifest | None, kind: str) -> tuple[float, float]:
    """(soft, hard) deadlines of a task in seconds; both stay well below the broker visibility timeout.

    ``manifest`` is needed for ``execute`` only (its shards' wall clock): grade and reduce messages
    can still be sent for a run whose manifest became unreadable, so that the run ends.
    """
    if kind == QUEUE_EXECUTE:
        if manifest is None:
            raise ValueError("an execute task's time limit needs the run's manifest")
        soft = manifest.settings.budget.wall_clock_s + EXECUTE_MARGIN_S
    elif kind == QUEUE_GRADE:
        soft = 900.0  # judge calls with retries and one re-ask each, plus calibration
    else:
        soft = 600.0
    return soft, soft + HARD_GRACE_S


class NoWorkingFolderLoader(AppLoader):  # type: ignore[misc]  # celery ships no type hints
    """Celery's loader, except that it imports with the path as it is.

    Celery's own puts the working folder first on ``sys.path`` while it imports task modules (and
    whatever other thread imports meanwhile: the warm-up imports litellm then). A worker started
    inside a repo under evaluation would run that repo's ``worker/`` or ``pydantic.py`` on the
    host; ``-P`` alone does not stop it.
    """

    def import_from_cwd(self, module: str, imp: Any = None, package: str | None = None) -> Any:
        return (imp or self.import_module)(module, package=package)


def make_app(settings: Settings | None = None) -> Celery:
    settings = settings or Settings()
    broker = settings.broker_url or "redis://127.0.0.1:6379/0"
    app = Celery("skill_eval", broker=broker, include=["worker.tasks"], loader=NoWorkingFolderLoader)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_ignore_result=True,
        worker_prefetch_multiplier=1,
        # A broker blip must not throw away a running shard: its state calls retry (context.py), it
        # finishes, and the message it can no longer ack comes back after the visibility timeout as
        # a no-op (the shard is terminal). Cancelling would redo every in-flight shard instead.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        broker_connection_retry_on_startup=True,
        # A follow-up message (grade, reduce) published while Redis restarts must wait for it, not
        # vanish: the shard has already moved, and nothing else would ever send it (~2 minutes).
        task_publish_retry_policy={"max_retries": 45, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 3},
        # A node serving several queues polls them in its queue order (CONSUME_ORDER, see
        # engine/node.py), not round robin: started shards finish first.
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout_s,
            "queue_order_strategy": "priority",
        },
        # One direct exchange per queue: a grade message must never reach the execute queue.
        task_queues=[Queue(q, Exchange(q, type="direct"), routing_key=q) for q in ALL_QUEUES],
        task_default_queue=QUEUE_EXECUTE,
        task_routes={
            TASK_EXECUTE: {"queue": QUEUE_EXECUTE},
            TASK_GRADE: {"queue": QUEUE_GRADE},
            TASK_REDUCE: {"queue": QUEUE_REDUCE},
        },
        task_serializer="json",
        accept_content=["json"],
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    return app


app = make_app()


class _Unread:
    """What ``send_task`` hands back to a sender that never reads a task's result."""

    __slots__ = ("id", "ignored")

    def __init__(self, task_id: str) -> None:
        self.id = task_id


_NO_RESULT: dict[str, Any] = {"ignore_result": True, "result_cls": _Unread}
"""Tasks report through the run's own Redis keys (engine/state.py), never a result backend, so a
send does not make Celery find one: resolving it reads every installed package's metadata for
backend plugins (tens of milliseconds) on a process's first send (the client's: the run's preflight)."""


class CeleryBroker:
    """The product's :class:`engine.broker.Broker`: ids-only messages through a Celery app, each with
    its task's time limits.

    ``manifest`` gives a run's manifest, which only an execute message needs (its shards' wall
    clock): grade and reduce messages must still go out for a run whose manifest became
    unreadable, so that the run ends. Inside :meth:`batch` the messages share one broker
    connection and go out together when the block ends (kombu's publish batch: one pipelined
    round trip instead of a client and a round trip per message); each stays its own message,
    acked on its own by the worker that runs it.
    """

    def __init__(self, celery: Celery, manifest: Callable[[str], RunManifest | None]) -> None:
        self._app = celery
        self._manifest = manifest
        self._batching = threading.local()
        """The open batch's kombu producer, per thread: a worker's threads share one broker."""

    def send(self, queue: str, run_id: str, shard_id: str | None = None) -> None:
        soft, hard = time_limits(self._manifest(run_id) if queue == QUEUE_EXECUTE else None, queue)
        self._app.send_task(
            TASK_NAMES[queue],
            args=[run_id] if shard_id is None else [run_id, shard_id],
            queue=queue,
            soft_time_limit=soft,
            time_limit=hard,
            producer=getattr(self._batching, "producer", None),
            # The ids are the whole message; Celery would otherwise repr them again into headers.
            argsrepr="",
            kwargsrepr="",
            **_NO_RESULT,
        )

    def preflight(self, run_id: str, queue: str) -> None:
        self._app.send_task(
            TASK_PREFLIGHT, args=[run_id, queue], queue=queue, time_limit=600, soft_time_limit=540, **_NO_RESULT
        )

    def host_check(self, run_id: str) -> None:
        limit = HOST_CHECK_LIMIT_S
        self._app.send_task(
            TASK_HOST_CHECK,
            args=[run_id],
            queue=QUEUE_EXECUTE,
            time_limit=limit,
            soft_time_limit=limit - 60,
            **_NO_RESULT,
        )

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        with self._app.producer_or_acquire() as producer, producer.batch(max_size=PUBLISH_BATCH):
            self._batching.producer = producer
            try:
                yield
            finally:
                self._batching.producer = None
