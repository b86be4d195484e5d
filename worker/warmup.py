"""Worker start-up: import the heavy modules once per process, and build a run's workspace
cache, off the first shard's path.

litellm alone costs seconds of CPU to import. With shards on threads (docs/design/engine.md) a
worker process imports it once, in a background thread started as the worker boots, while
Celery connects to the broker; a shard that needs one of these modules before the thread is
done simply waits on Python's import lock. A process started for a run whose models all go
straight over HTTP (worker/models/direct.py) is told so (``SKILL_EVAL_PRELOAD_LITELLM=0``,
producer/launch/prestart.py) and leaves litellm out: a model that needs it after all imports it on
its first call.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
import threading
from typing import TYPE_CHECKING

import structlog

from engine.heap import imports_frozen
from schemas.constants import LITELLM_PRELOAD_ENV

if TYPE_CHECKING:
    from schemas.manifest import RunManifest
    from worker.context import Context

log = structlog.get_logger("skill_eval.worker")

FIRST_CALL_MODULES = ("worker.context", "worker.models.client", "worker.preflight")
"""What a new worker's first task, the run's preflight, needs to make its model call: imported
(and httpx's transport loaded, and litellm when wanted) before the shards' modules, so that a
worker given its orders early sends that call without waiting on imports it does not need yet."""

HEAVY_MODULES = (
    "worker.executor.agent",
    "worker.grading.judge",
    "worker.workspace",
    "engine.records",
    "engine.collect",
    "harnesses.registry",
    "worker.grading.calibration",
    "worker.boot",
)
"""The modules a shard's path needs, short of the app: everything ``worker.tasks`` imports that
does not read the environment as it loads."""

CELERY_BOOT_MODULES = (
    "celery.apps.worker",
    "celery.worker.components",
    "celery.worker.consumer",
    "celery.worker.consumer.delayed_delivery",
    "celery.worker.autoscale",
    "celery.worker.strategy",
    "celery.concurrency.thread",
    "celery.app.amqp",
    "celery.app.control",
    "celery.app.events",
    "celery.app.log",
    "celery.app.routes",
    "celery.backends.base",
    "celery.events.dispatcher",
    "celery.events.receiver",
    "celery.fixups.django",
    "kombu.matcher",
    "kombu.mixins",
    "kombu.pidbox",
    "kombu.transport.redis",
    "billiard.pool",
)
"""What a worker node imports as it boots (worker/boot.py: the worker, its consumer, the
threads pool, the Redis transport, the remote-control and event machinery): imported first, a
process started ahead of its cluster or left as a spare boots in a fraction of the time once
it has its orders. The worker app itself is not among them: it reads its broker from the
environment those orders bring."""


def litellm_wanted() -> bool:
    """Whether this process imports litellm during its start-up (a fleet's workers and spares do)."""
    return os.environ.get(LITELLM_PRELOAD_ENV, "1").strip() != "0"


def _load_litellm() -> None:
    importlib.import_module("worker.models.via_litellm").warm_litellm()


def import_heavy_modules() -> None:
    """Import CELERY_BOOT_MODULES, then FIRST_CALL_MODULES (and httpx's transport), then litellm
    unless :func:`litellm_wanted` says not (a model routed through it makes the first call with
    it), then, once :func:`hold_heavy_imports` lets them, the direct transport's TLS context and
    price table (not needed before a first plain-HTTP call is out) and HEAVY_MODULES, with the cyclic
    GC paused; freeze what they built (engine/heap.py: a quarter off litellm's import CPU, and
    collections during shards stay cheap)."""
    with imports_frozen():
        try:
            for name in CELERY_BOOT_MODULES:
                importlib.import_module(name)
            platform.platform()  # Celery's start-up banner asks, and that runs `uname -p` once
        finally:
            _celery_imported.set()
        for name in FIRST_CALL_MODULES:
            importlib.import_module(name)
        importlib.import_module("worker.models.direct").warm_up()
        if litellm_wanted():
            _load_litellm()
        _go_on.wait(HOLD_MAX_S)
        importlib.import_module("worker.models.direct").warm_up_rest()
        for name in HEAVY_MODULES:
            importlib.import_module(name)
    _imported.set()


_imported = threading.Event()
_celery_imported = threading.Event()
_go_on = threading.Event()
_go_on.set()

HOLD_MAX_S = 2.0
"""The longest the warm-up holds the shards' modules back while its node boots."""


def hold_heavy_imports() -> None:
    """Hold HEAVY_MODULES back while this process boots its node and sends its first call.

    A node that has its orders boots Celery on the main thread, then runs its first task, the
    run's preflight, on a pool thread; a warm-up thread importing the shards' modules meanwhile
    takes half the interpreter's lock from that path (the first model call 0.1-0.15 s later,
    measured).
    Those modules are not needed before the preflight's answer, so the warm-up, once it has
    what the first call needs, waits until :func:`release_heavy_imports` (the first task has
    begun) or HOLD_MAX_S. A process without orders yet (a spare, a worker ahead of its
    cluster) does not hold: it has nothing else to do.
    """
    _go_on.clear()


def release_heavy_imports() -> None:
    _go_on.set()


def wait_for_celery_modules(timeout_s: float = 60.0) -> None:
    """Until the warm-up has imported (or failed to import) CELERY_BOOT_MODULES, at most ``timeout_s``.

    A process about to boot Celery waits here rather than importing the same modules on a
    second thread at the same time: two threads importing one package's circular imports can
    each hold a module the other needs, which Python breaks by failing one of the imports.
    """
    if _warmup is not None:  # no warm-up in this process: nothing to wait for
        _celery_imported.wait(timeout_s)


def import_litellm_if_wanted() -> threading.Thread | None:
    """Import litellm in a background thread when this process's warm-up left it out and its
    orders now say the run may need it (a spare left by a run whose models all went direct,
    claimed by one whose models do not): the thread, or None when there is nothing to do.

    Only once the warm-up is over: while it runs, it reads the same environment itself and
    imports litellm if wanted, and two threads must never import one package at once.
    """
    if not imported() or not litellm_wanted() or "worker.models.via_litellm" in sys.modules:
        return None
    thread = threading.Thread(target=_import_litellm, name="import-litellm", daemon=True)
    thread.start()
    return thread


def _import_litellm() -> None:
    with imports_frozen():
        _load_litellm()


def imported() -> bool:
    """Whether :func:`import_heavy_modules` has completed in this process (it raised if not)."""
    return _imported.is_set()


_warmup: threading.Thread | None = None
_warmup_lock = threading.Lock()


def start_warmup() -> threading.Thread:
    """Run :func:`import_heavy_modules` in a daemon thread, once per process; the thread.

    A worker started ahead of its cluster (worker/prestart.py) starts it before Celery's
    start-up asks again: the second call gets the same thread, so one import runs with the
    collector paused, not two racing to pause and resume it.
    """
    global _warmup
    with _warmup_lock:
        if _warmup is None:
            _warmup = threading.Thread(target=import_heavy_modules, name="import-heavy-modules", daemon=True)
            _warmup.start()
        return _warmup


def start_workspace_warmup(ctx: Context, manifest: RunManifest) -> threading.Thread:
    """Unpack the run's snapshot and scrub its corpora's history in a daemon thread; the thread.

    Started by the execute queue's preflight (worker/tasks.py), so the history rewrite (a
    ``git filter-repo`` per skill, the first shard's biggest set-up cost) runs while the
    preflight's model call is out and the producer is still waiting to enqueue. Exactly the
    steps and checks the first shard would take on the same inputs; a failure here is only
    logged, and the shard that meets it again ends with its named error as before.
    """
    thread = threading.Thread(target=_warm_workspaces, args=(ctx, manifest), name="warm-workspaces", daemon=True)
    thread.start()
    return thread


def _warm_workspaces(ctx: Context, manifest: RunManifest) -> None:
    from schemas.shard import GUTTED, NO_SKILL
    from schemas.status import SandboxMode
    from worker.workspace import warm_cache

    if ctx.settings.sandbox is SandboxMode.BWRAP and manifest.plan.sandbox is not SandboxMode.BWRAP:
        return  # its shards will be refused before touching the repo: so is the warm-up
    seen: set[tuple[str, str, bool]] = set()
    for shard in manifest.plan.shards:
        strip = shard.variant in (NO_SKILL, GUTTED)  # the gutted arm starts from the stripped tree
        key = (manifest.snapshots.get(shard.variant, ""), shard.skill, strip)
        if not key[0] or key in seen:
            continue
        seen.add(key)
        try:
            warm_cache(
                ctx.store,
                key[0],
                skill=shard.skill,
                cache_dir=ctx.settings.cache_dir,
                strip_skill=strip,
                graded_paths=manifest.plan.bundle(shard.skill).graded_paths,
            )
        except Exception as exc:  # the shard meets the same error and reports it by name
            log.info("workspace cache not warmed", skill=shard.skill, error=str(exc))
