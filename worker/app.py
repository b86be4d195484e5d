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

from typing import Any

from celery import Celery
from celery.loaders.app import AppLoader
from kombu import Exchange, Queue  # type: ignore[attr-defined]  # kombu re-exports without __all__

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
