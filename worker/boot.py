"""Start a Celery worker node in this process from its :class:`engine.node.WorkerNode`.

``python -P -m worker.boot '<node JSON>'`` is how every worker process starts (the embedded
cluster's, ``skill-eval worker``'s, the tests'), and a process started ahead of its cluster
(worker/prestart.py) calls :func:`run_node` once it has its orders. It builds the worker the
way ``celery -A worker.tasks worker -Q ... -c N -P threads -n NAME --prefetch-multiplier 1
--without-gossip --without-mingle --without-heartbeat -l LEVEL`` would, without loading
Celery's command line (engine/node.py says why); tests/test_worker_boot.py holds the two to
the same worker.
"""

from __future__ import annotations

import sys

from engine.node import WorkerNode


def build_worker(node: WorkerNode) -> object:
    """The Celery worker (``celery.apps.worker.Worker``) for ``node``, configured and not started."""
    from celery import concurrency
    from celery.utils.nodenames import default_nodename, host_format

    import worker.tasks  # noqa: F401  # the tasks and their signal handlers, registered on the app
    from worker.app import app

    return app.Worker(
        hostname=host_format(default_nodename(node.name)),
        pool_cls=concurrency.get_implementation("threads"),
        concurrency=node.concurrency,
        queues=list(node.queues),
        prefetch_multiplier=1,
        without_gossip=True,
        without_mingle=True,
        without_heartbeat=True,
        loglevel=node.loglevel,
        logfile=None,
        optimization="default",
    )


def run_node(node: WorkerNode) -> int:
    """Run ``node`` until it is told to stop; its exit code.

    The warm-up (worker/warmup.py) would otherwise start at worker_init, in the middle of the
    boot, and import Celery's boot modules on its thread while this one imports the same ones:
    two threads in one package's circular imports can each hold a module the other needs. So it
    starts here (or is already running, in a process started ahead of its cluster) and imports
    them first while this thread waits.
    """
    from worker.warmup import start_warmup, wait_for_celery_modules

    start_warmup()
    wait_for_celery_modules()
    worker = build_worker(node)
    worker.start()  # type: ignore[attr-defined]
    return int(worker.exitcode or 0)  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: python -P -m worker.boot '<worker node JSON>'")
    try:
        node = WorkerNode.from_json(args[0])
    except (ValueError, KeyError, TypeError) as exc:
        sys.exit(f"worker.boot: not a worker node: {exc}")
    sys.exit(run_node(node))


if __name__ == "__main__":
    main()
