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

import atexit
import contextlib
import os
import sys
from typing import NoReturn

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
    from worker.warmup import hold_heavy_imports, start_warmup, wait_for_celery_modules

    hold_heavy_imports()
    start_warmup()
    wait_for_celery_modules()
    worker = build_worker(node)
    worker.start()  # type: ignore[attr-defined]
    return int(worker.exitcode or 0)  # type: ignore[attr-defined]


def leave(code: int) -> NoReturn:
    """End a worker process that has stopped: its exit handlers, its output flushed, then ``os._exit``.

    Not the interpreter's own teardown, which can hang for good. The warm-up thread (a daemon)
    may still be importing litellm, seconds of CPU, when a node is told to stop soon after it
    started; the teardown freezes it where it is, holding that import's module lock, and then
    collects litellm's HTTP handlers, whose finalizers import a module: they wait on that lock
    forever. By the time the node's run returns, Celery's shutdown has run (the pool joined,
    the broker connection closed) and so have the node's own shutdown handlers; what the
    teardown would add is the exit handlers, run here, and the finalizers, not needed.
    """
    try:
        atexit._run_exitfuncs()  # logging's flush among them
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    check_sandbox = args[:1] == ["--check-sandbox"]
    args = args[1:] if check_sandbox else args
    if len(args) != 1:
        sys.exit("usage: python -P -m worker.boot [--check-sandbox] '<worker node JSON>'")
    try:
        node = WorkerNode.from_json(args[0])
    except (ValueError, KeyError, TypeError) as exc:
        sys.exit(f"worker.boot: not a worker node: {exc}")
    if check_sandbox:
        refuse_unconfined()
    leave(run_node(node))


def refuse_unconfined() -> None:
    """An execute worker that cannot sandbox refuses to start, never runs unconfined: the named error
    and exit code 2, as the command line that started it prints them (``skill-eval worker``)."""
    from schemas.errors import NoSandbox
    from schemas.status import SandboxMode
    from worker.sandbox import require_sandbox

    try:
        require_sandbox(SandboxMode.BWRAP)
    except NoSandbox as exc:
        print(exc, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
