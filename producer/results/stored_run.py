"""Commands on a run already submitted: ``status``, ``report`` and ``resubmit``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis
from rich.console import Console

from engine.collect import StoredRun, collect_outcomes
from engine.delivery import Delivery, stall_bound
from engine.labels import labelled_answers
from engine.records import load_manifest, load_result, load_run_end, put_result
from engine.segments import SegmentWriter
from engine.settings import Settings, shown_url
from engine.state import RunState
from engine.store import open_store
from engine.usage import usage_totals
from producer.results.reports import complete_block, write_reports
from reducer.agreement import agreement
from reducer.from_store import run_result
from reducer.summary import NOT_ENDED_WHY
from schemas.constants import DEFAULT_REPORT_DIR
from schemas.errors import BlockedError
from schemas.report import RunResult
from schemas.status import ShardState
from schemas.summary import RunStatus
from schemas.visible import visible


def rereport(run_id: str, settings: Settings, out_dir: Path | None, out: Console) -> RunResult:
    """``skill-eval report``: reduce again from stored verdicts and write the reports.

    A run its checks refused has nothing to reduce: its named error again (``BlockedError``, exit 2).
    """
    store = open_store(settings.store, waited_on=True)
    end = load_run_end(store, run_id)
    if end is not None and end.how == "blocked" and load_result(store, run_id) is None:
        raise BlockedError(f"run {run_id} was refused before any shard was sent: {end.reason}")

    def seal() -> None:
        """Seal what a reduce that never ran left in Redis (a streamed reduce reads only sealed lines)."""
        if settings.broker_url:
            SegmentWriter(redis.Redis.from_url(settings.broker_url), store).flush(run_id)

    reduced = run_result(StoredRun(store, run_id, seal=seal), stream_from=settings.stream_reduce_shards)
    result, manifest = reduced.result, reduced.manifest
    cases = {s.shard_id: (s.skill, s.case_id) for s in manifest.plan.shards}  # empty for a streamed run
    figures = agreement(*labelled_answers(store, run_id, cases))
    if figures:
        result = result.model_copy(update={"human_agreement": figures})
    unfinished = sum(s.unfinished for s in result.skills)
    if not unfinished:  # a partial result stored would read as the run's final one (status, report, run)
        put_result(store, result)
    paths = write_reports(result, manifest, store, out_dir or Path(manifest.out_dir or DEFAULT_REPORT_DIR))
    if unfinished and end is not None:
        out.print(visible(f"{end.label}: {end.reason}"), markup=False)
    if unfinished:  # what the block's PARTIAL header means for the verdict, said before the block
        out.print("partial: shards not ended count as not graded, and the verdict cannot be PASS", markup=False)
    # Nothing runs an interrupted run any more: its shards not ended are not "still running".
    why = "the run was interrupted" if end is not None and end.how == "interrupted" else NOT_ENDED_WHY
    out.print(complete_block(result, paths, why), markup=False, highlight=False)
    return result


def _delivery(client: redis.Redis, run_id: str, settings: Settings) -> dict[str, Any]:
    """The ``RunStatus`` fields on shards waiting without a lease, and whether the run is stalled.

    Stalled: shards wait (for a message, or with a lease that expired: their worker died), none
    is in flight (a live lease), and no shard was claimed or moved for longer than
    the delivery ledger's bound plus three reaper periods; a live fleet would have sent a lost
    message again and started it by then (docs/design/cluster.md, "Delivery from the ledger").
    """
    waiting = Delivery(client).waiting(run_id)
    bound = stall_bound(settings.redeliver_after_s, settings.reaper_period_s)
    return {
        "waiting": waiting.shards,
        "waiting_oldest_s": waiting.oldest_s,
        "in_flight": waiting.leased,
        "lease_expired": waiting.expired,
        "idle_s": waiting.idle_s,
        "stalled": waiting.stalled(bound),
        "stall_after_s": bound,
    }


def run_status(run_id: str, settings: Settings) -> RunStatus:
    """Counts by state, ``done`` and per-model usage: from Redis when a broker is given, else from the store."""
    store = open_store(settings.store, waited_on=True)
    if settings.broker_url:
        client = redis.Redis.from_url(settings.broker_url)
        state = RunState(client)
        if state.exists(run_id):
            terminal, total = state.totals(run_id)
            done = state.reduced(run_id)
            return RunStatus(
                run_id=run_id,
                source="broker",
                total=total,
                states=state.counts(run_id),
                done=done,
                terminal=terminal,
                usage=usage_totals(client, run_id),
                **({} if done else _delivery(client, run_id, settings)),
            )
    # A run its broker knows is going (the broker's word first); one it does not may have ended
    # without a result: refused by its checks (never registered), or its embedded broker is gone.
    lost_by = shown_url(settings.broker_url) if settings.broker_url else None
    manifest = load_manifest(store, run_id)
    outcomes = collect_outcomes(store, manifest)
    counts = {s.value: 0 for s in ShardState}
    for o in outcomes.values():
        counts[o.state.value] += 1
    result = load_result(store, run_id)
    end = None if result else load_run_end(store, run_id)
    unsent = len(manifest.plan.shards) - len(outcomes)
    refused = end is not None and end.how == "blocked"  # its checks refused it: nothing was sent
    return RunStatus(
        run_id=run_id,
        source="store",
        total=len(manifest.plan.shards),
        states=counts,
        done=result is not None,
        terminal=len(outcomes),
        usage={k: v.model_dump() for k, v in result.usage.items()} if result else {},
        end=end,
        not_sent=unsent if refused else 0,
        not_ended=0 if refused else unsent,  # queued or executing: only the broker knows which
        lost_by=lost_by,
    )
