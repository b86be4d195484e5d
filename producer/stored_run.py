"""Commands on a run already submitted: ``status``, ``report`` and ``resubmit``."""

from __future__ import annotations

from pathlib import Path

import redis
from rich.console import Console

from engine.collect import (
    collect_outcomes,
    ended_in_store,
    reduce_from_store,
    reduce_streamed,
    reduces_by_streaming,
)
from engine.labels import run_agreement
from engine.records import load_manifest, load_outline, load_result, put_result
from engine.segments import SegmentWriter
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from engine.usage import usage_totals
from producer.reports import complete_block, write_reports
from schemas.constants import DEFAULT_REPORT_DIR
from schemas.report import RunResult
from schemas.status import ShardState
from schemas.summary import RunStatus


def rereport(run_id: str, settings: Settings, out_dir: Path | None, out: Console) -> RunResult:
    """``skill-eval report``: reduce again from stored verdicts and write the reports."""
    store = open_store(settings.store)
    outline = load_outline(store, run_id)
    if outline is not None and reduces_by_streaming(outline, settings.stream_reduce_shards):
        # A run this big reduces from its outcome segments (the reports need no shard list).
        if settings.broker_url:  # seal what a reduce that never ran left in Redis
            SegmentWriter(redis.Redis.from_url(settings.broker_url), store).flush(run_id)
        manifest = outline.manifest
        result = reduce_streamed(store, outline, ended_in_store(store, run_id)).result
    else:
        manifest = load_manifest(store, run_id)
        result = reduce_from_store(store, manifest)
    cases = {s.shard_id: (s.skill, s.case_id) for s in manifest.plan.shards}  # empty for a streamed run
    figures = run_agreement(store, run_id, cases)
    if figures:
        result = result.model_copy(update={"human_agreement": figures})
    put_result(store, result)
    paths = write_reports(result, manifest, store, out_dir or Path(manifest.out_dir or DEFAULT_REPORT_DIR))
    out.print(complete_block(result, paths), markup=False, highlight=False)
    return result


def run_status(run_id: str, settings: Settings) -> RunStatus:
    """Counts by state, ``done`` and per-model usage: from Redis when a broker is given, else from the store."""
    store = open_store(settings.store)
    if settings.broker_url:
        client = redis.Redis.from_url(settings.broker_url)
        state = RunState(client)
        if state.exists(run_id):
            terminal, total = state.totals(run_id)
            return RunStatus(
                run_id=run_id,
                source="broker",
                total=total,
                states=state.counts(run_id),
                done=state.reduced(run_id),
                terminal=terminal,
                usage=usage_totals(client, run_id),
            )
    manifest = load_manifest(store, run_id)
    outcomes = collect_outcomes(store, manifest)
    counts = {s.value: 0 for s in ShardState}
    for o in outcomes.values():
        counts[o.state.value] += 1
    counts[ShardState.QUEUED.value] += len(manifest.plan.shards) - len(outcomes)
    result = load_result(store, run_id)
    return RunStatus(
        run_id=run_id,
        source="store",
        total=len(manifest.plan.shards),
        states=counts,
        done=result is not None,
        terminal=len(outcomes),
        usage={k: v.model_dump() for k, v in result.usage.items()} if result else {},
    )
