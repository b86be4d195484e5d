"""One run from submit to its report: submit on a broker (or an embedded cluster), wait, conclude."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import redis
from rich.console import Console

from engine.broker import Broker
from engine.budget import RunBudget
from engine.collect import StoredRun
from engine.settings import Settings
from engine.state import RunState
from engine.store import ArtifactStore, open_store
from engine.usage import usage_totals
from producer.launch.adaptive import further_rounds
from producer.launch.cluster import open_cluster, task_sender
from producer.launch.embedded import EmbeddedCluster
from producer.launch.preflight import Waiting, check_before_dispatch
from producer.launch.progress import RunStalled, wait_for_run
from producer.launch.stopped import ended_if_stopped
from producer.plan.request import RunRequest
from producer.results.reports import append_run_log, complete_block, write_reports
from reducer.from_store import run_result
from reducer.stream import reduce_run
from reducer.summary import render_nothing_run
from schemas.constants import QUEUE_EXECUTE, QUEUE_GRADE
from schemas.errors import SkillEvalError
from schemas.manifest import RunManifest
from schemas.preflight import models_for
from schemas.report import RunResult

Submitter = Callable[[RunManifest, ArtifactStore, RunState, Broker, str | None], int]
"""Store the manifest (unless the last argument is the key it is already stored under), register
the shards, send their first messages; the number sent."""


def drive(
    manifest: RunManifest,
    submitter: Submitter,
    req: RunRequest,
    settings: Settings,
    out: Console,
    err: Console,
    *,
    opened: tuple[Settings, EmbeddedCluster | None] | None = None,
) -> RunResult | str:
    """Submit on the given broker (or an embedded cluster), wait unless detached, then conclude.

    ``opened``: the broker and embedded cluster the caller already started (and stops), so the
    worker could boot while the run was being planned; None opens them here.
    Returns the result, or the run id when detached.
    """
    if not manifest.plan.shards:
        return conclude_nothing_run(manifest, err if req.detach else out)
    store = open_store(settings.store)
    say = functools.partial(err.print, markup=False, highlight=False)
    for line in concurrency_notes(manifest):
        say(line)
    cluster = contextlib.nullcontext(opened) if opened is not None else open_cluster(settings, req.workers)
    stopping = functools.partial(ended_if_stopped, store, manifest.plan.run_id, say=say)
    with cluster as (live, embedded), stopping(embedded=embedded is not None) as driving:
        client = redis.Redis.from_url(live.broker_url or "")
        state = RunState(client)
        publisher = task_sender(live, manifest)
        set_caps(client, manifest)
        with named_if_refused(err, manifest.plan.run_id):
            stored = check_before_dispatch(
                manifest,
                store,
                state,
                publisher,
                models=req.preflight,
                embedded=embedded is not None,
                timeout_s=req.preflight_timeout_s,
                waiting=None if embedded else Waiting(say),
            )
        if embedded is not None:
            embedded.grow()  # its other worker processes, now that nothing waits on the first call
        driving.sent = True
        submitter(manifest, store, state, publisher, stored)  # a large manifest is written once
        if req.detach and embedded is None:
            return manifest.plan.run_id
        wait = functools.partial(
            wait_for_run,
            state,
            manifest.plan.run_id,
            console=err,
            usage=lambda: usage_totals(client, manifest.plan.run_id),
            alive=embedded.alive if embedded else None,
            show=req.show_progress,
        )
        with log_tail_if_stalled(embedded):
            wait()
            manifest = further_rounds(manifest, store, state, publisher, wait, err)
    return conclude_run(manifest, store, settings, req.out, out)


@contextlib.contextmanager
def log_tail_if_stalled(embedded: EmbeddedCluster | None) -> Iterator[None]:
    """An embedded run's stall carries its workers' last log lines: they say why they stopped."""
    try:
        yield
    except RunStalled as exc:
        if embedded is None:
            raise
        raise RunStalled(f"{exc.detail}\nlast worker log lines:\n{embedded.log_tail(2000)}") from exc


def set_caps(client: redis.Redis, manifest: RunManifest) -> None:
    """The run's cost and token caps, where every worker's calls are counted against them."""
    caps = manifest.settings
    if caps.max_cost_usd is not None or caps.max_tokens is not None:
        RunBudget(client, manifest.plan.run_id).set_caps(caps.max_tokens, caps.max_cost_usd)


@contextlib.contextmanager
def named_if_refused(err: Console, run_id: str) -> Iterator[None]:
    """Say the run's id before a refusal of its checks: the run is stored all the same (its manifest
    and its ``blocked`` end), and ``status``/``report`` find it only by its id."""
    try:
        yield
    except SkillEvalError:
        err.print(f"run: {run_id}", markup=False, highlight=False)
        raise


def concurrency_notes(manifest: RunManifest) -> list[str]:
    """A note for each model the product itself calls (not an external executor's, nor a recording's)
    whose configured concurrency is below the run's shards in flight."""
    called = [m for queue in (QUEUE_EXECUTE, QUEUE_GRADE) for m in models_for(manifest, queue)]
    return manifest.settings.models.narrower_than_run(called)


def conclude_run(
    manifest: RunManifest, store: ArtifactStore, settings: Settings, out_dir: Path, out: Console
) -> RunResult:
    """Load (or compute) the reduced result, write the reports and the run-log line, print the block."""
    records = StoredRun(store, manifest.plan.run_id, manifest=manifest)
    result = run_result(records, stream_from=settings.stream_reduce_shards, reuse=True).result
    paths = write_reports(result, manifest, store, out_dir)
    append_run_log(result, manifest, settings.run_log)
    out.print(complete_block(result, paths), markup=False, highlight=False)
    return result


def conclude_nothing_run(manifest: RunManifest, out: Console) -> RunResult:
    """A plan with nothing left to run: every corpus skipped, for its earlier report or its named
    error. Nothing is stored, written or logged (no report, page, JUnit file or run-log line would
    describe a run that happened); the verdict carries the earlier reports' and says so. A detached
    run prints this on stderr: its stdout holds a run id or nothing."""
    result = reduce_run(manifest.plan, {}, skipped=manifest.skipped, already_reported=manifest.reported)
    out.print(render_nothing_run(result), markup=False, highlight=False)
    return result
