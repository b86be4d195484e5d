"""Carrying out ``skill-eval run`` and ``grade``: plan, submit, wait, report — on a cluster or an embedded one."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from rich.console import Console

from engine.settings import Settings
from engine.state import RunState
from engine.store import ArtifactStore, open_store
from producer.embedded import EmbeddedCluster
from producer.planning import arm_variants, new_run_id, plan_run, power_lines
from producer.progress import RunStalled, wait_for_run
from producer.repo import Repo
from producer.reports import append_run_log, complete_block, reported_bundle_keys, write_reports
from producer.submit import build_manifest, submit
from reducer.scoring import reduce_run
from schemas.errors import ConfigError, StoreError
from schemas.manifest import RunManifest, RunSettings, manifest_key, result_key
from schemas.report import RunResult
from schemas.shard import RunPlan, SkillBundle
from schemas.status import ShardState

Enqueue = Callable[[str, str, str | None], None]
"""enqueue(kind, run_id, shard_id or None): send an execute, grade or reduce message."""
Submitter = Callable[[RunManifest, ArtifactStore, RunState, Enqueue], int]


@dataclass
class RunRequest:
    """Everything ``skill-eval run`` (or ``grade``) was asked for."""

    skills: list[str]
    all_evals: bool
    repo: Path
    models: list[str]
    judges: list[str]
    epochs: int = 1
    out: Path = Path("zuvo/reports")
    workers: int = 2
    detach: bool = False
    force: bool = False
    show_progress: bool = True
    settings: RunSettings = field(default_factory=RunSettings)
    compare: str | None = None
    """``--compare <ref>``: also grade the skill as it was at this git ref."""
    baseline: str | None = None
    """``--baseline no-skill``: also run every case with the skill absent."""
    reported: list[str] = field(default_factory=list)
    """Filled by :func:`plan_request`: corpora left out because their bundle key already has a report."""


def plan_request(req: RunRequest, out: Console) -> tuple[Repo, list[SkillBundle], list[str]]:
    """Validate targets; return the repo, the bundles to run and the named errors of skipped corpora."""
    repo = Repo(req.repo)
    files = repo.targets(req.skills, req.all_evals)
    outcomes = repo.load_many(files)
    errors = [o.error for o in outcomes if o.error]
    if errors and not req.all_evals:
        raise errors[0]
    bundles = [o.bundle for o in outcomes if o.bundle]
    if req.all_evals and not req.force:
        done = reported_bundle_keys(req.out)
        for b in [b for b in bundles if set(req.models) <= done.get(b.bundle_key, set())]:
            out.print(
                f"skipped {b.corpus_file}: bundle key {b.bundle_key} already reported in {req.out} (--force re-runs it)"
            )
            bundles.remove(b)
            req.reported.append(b.corpus_file)
    return repo, bundles, [str(e) for e in errors]


@contextlib.contextmanager
def cluster(settings: Settings, workers: int) -> Iterator[tuple[Settings, EmbeddedCluster | None]]:
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


def enqueue_via(settings: Settings, manifest: RunManifest) -> Enqueue:
    """Send ids-only messages to the run's broker, with the run's per-task time limits."""
    from worker.app import TASK_NAMES, make_app, time_limits

    app = make_app(settings)

    def enqueue(kind: str, run_id: str, shard_id: str | None) -> None:
        soft, hard = time_limits(manifest, kind)
        args = [run_id] if shard_id is None else [run_id, shard_id]
        app.send_task(TASK_NAMES[kind], args=args, queue=kind, soft_time_limit=soft, time_limit=hard)

    return enqueue


def drive(
    manifest: RunManifest, submitter: Submitter, req: RunRequest, settings: Settings, out: Console, err: Console
) -> RunResult | str:
    """Submit on the given broker (or an embedded cluster), wait unless detached, then report."""
    store = open_store(settings.store)
    if not manifest.plan.shards:
        return finish_run(manifest, store, settings, req.out, out, already_reported=req.reported)
    with cluster(settings, req.workers) as (live, embedded):
        client = redis.Redis.from_url(live.broker_url or "")
        state = RunState(client)
        submitter(manifest, store, state, enqueue_via(live, manifest))
        if req.detach and embedded is None:
            return manifest.plan.run_id
        from engine.usage import usage_totals

        try:
            wait_for_run(
                state,
                manifest.plan.run_id,
                console=err,
                usage=lambda: usage_totals(client, manifest.plan.run_id),
                alive=embedded.alive if embedded else None,
                show=req.show_progress,
            )
        except RunStalled as exc:
            tail = f"\nlast worker log lines:\n{embedded.log_tail(2000)}" if embedded else ""
            raise RunStalled(f"{exc.detail}{tail}") from exc
    return finish_run(manifest, store, settings, req.out, out)


def run_evaluation(req: RunRequest, settings: Settings, out: Console, err: Console) -> RunResult | str:
    """Plan, submit and (unless detached) wait and report. Returns the result, or the run id when detached."""
    repo, bundles, skipped = plan_request(req, out)
    variants = arm_variants(req.compare, req.baseline)
    plan = plan_run(
        new_run_id(),
        bundles,
        req.models,
        judges=req.judges,
        epochs=req.epochs,
        sandbox=settings.sandbox,
        variants=variants,
    )
    guards: list[str] = []
    if req.compare:
        plan, guards = plan_compare(plan, repo.root, req.compare, req.out, err)
    for line in power_lines(plan):  # before the run: what this many cases can detect
        err.print(line, markup=False, highlight=False)
    store = open_store(settings.store)
    manifest = build_manifest(plan, repo.root, store, req.settings, out_dir=str(req.out), skipped=skipped)
    manifest = manifest.model_copy(update={"guards": guards})
    if req.settings.executor.startswith("cmd:") and plan.shards:
        probe_external_executor(req.settings.executor, settings)

    def submitter(m: RunManifest, st: ArtifactStore, state: RunState, enqueue: Enqueue) -> int:
        return submit(m, st, state, lambda run_id, shard_id: enqueue("execute", run_id, shard_id))

    return drive(manifest, submitter, req, settings, out, err)


def plan_compare(plan: RunPlan, root: Path, ref: str, out_dir: Path, err: Console) -> tuple[RunPlan, list[str]]:
    """Apply the compare guards per skill; write each baseline's audit record; return the plan and guard lines."""
    from producer.compare import baseline_record, check_compare, restrict_baseline

    guards, allowed = [], set()
    for bundle in plan.bundles:
        guard = check_compare(root, ref, bundle.skill)
        if guard is not None:
            err.print(f"{bundle.skill}: {guard}", markup=False)
            guards.append(f"{bundle.skill}: {guard}")
            continue
        allowed.add(bundle.skill)
        context_dir = out_dir.parent / "context"
        context_dir.mkdir(parents=True, exist_ok=True)
        record = context_dir / f"skill-eval-baseline-{bundle.skill}-{plan.run_id}.txt"
        record.write_bytes(baseline_record(root, ref, bundle.skill))
    return restrict_baseline(plan, ref, allowed), guards


def probe_external_executor(option: str, settings: Settings) -> None:
    """The contract's canary: prove transcript capture before a batch, or raise BLOCKED_NO_TRANSCRIPT_CAPTURE."""
    from worker.executor.canary import probe_transcript_capture
    from worker.executor.external import ExternalExecutor

    probe_transcript_capture(
        ExternalExecutor.from_option(option), mode=settings.sandbox, parent=settings.workspaces_dir
    )


def grade_recorded(
    req: RunRequest, trajectories: str, settings: Settings, out: Console, err: Console
) -> RunResult | str:
    """``skill-eval grade``: shard recorded trajectories and grade them like a run."""
    from engine.importers import load_trajectories
    from producer.grade_only import recorded_models, select, submit_recorded

    recorded = load_trajectories(trajectories)
    if not req.skills and not req.all_evals:
        req.skills = sorted({skill for skill, _, _, _ in recorded})
    repo, bundles, skipped = plan_request(req, out)
    kept, ignored = select(recorded, bundles)
    for line in ignored:
        err.print(f"ignored recording {line}", markup=False)
    epochs = max((epoch for _, _, epoch, _ in kept), default=0) + 1
    models = recorded_models(kept)
    plan = plan_run(new_run_id(), bundles, models, judges=req.judges, epochs=epochs, sandbox=settings.sandbox)
    run_settings = req.settings.model_copy(update={"executor": f"recorded:{trajectories}"})
    manifest = build_manifest(plan, repo.root, None, run_settings, out_dir=str(req.out), skipped=skipped)

    def submitter(m: RunManifest, st: ArtifactStore, state: RunState, enqueue: Enqueue) -> int:
        return submit_recorded(m, kept, st, state, enqueue)

    return drive(manifest, submitter, req, settings, out, err)


def finish_run(
    manifest: RunManifest,
    store: ArtifactStore,
    settings: Settings,
    out_dir: Path,
    out: Console,
    already_reported: Sequence[str] = (),
) -> RunResult:
    """Load (or compute) the reduced result, write the reports and the run-log line, print the block."""
    from engine.collect import reduce_from_store

    key = result_key(manifest.plan.run_id)
    if store.exists(key):
        result = RunResult.model_validate_json(store.get(key))
    elif not manifest.plan.shards:  # nothing ran: no stored verdicts, only what was left out and why
        result = reduce_run(manifest.plan, {}, skipped=manifest.skipped, already_reported=already_reported)
    else:
        result = reduce_from_store(store, manifest)
    paths = write_reports(result, manifest, store, out_dir)
    append_run_log(result, manifest, settings.run_log)
    out.print(complete_block(result, paths), markup=False, highlight=False)
    return result


def load_manifest(store: ArtifactStore, run_id: str) -> RunManifest:
    key = manifest_key(run_id)
    if not store.exists(key):
        raise StoreError(f"run {run_id}: no manifest at {key} in {store.uri}")
    return RunManifest.model_validate_json(store.get(key))


def rereport(run_id: str, settings: Settings, out_dir: Path | None, out: Console) -> RunResult:
    """``skill-eval report``: reduce again from stored verdicts and write the reports."""
    from engine.collect import reduce_from_store

    store = open_store(settings.store)
    manifest = load_manifest(store, run_id)
    result = reduce_from_store(store, manifest)
    store.put(result_key(run_id), result.model_dump_json().encode())
    paths = write_reports(result, manifest, store, out_dir or Path(manifest.out_dir or "zuvo/reports"))
    out.print(complete_block(result, paths), markup=False, highlight=False)
    return result


def run_status(run_id: str, settings: Settings) -> dict[str, Any]:
    """Counts by state, ``done`` and per-model usage: from Redis when a broker is given, else from the store."""
    store = open_store(settings.store)
    if settings.broker_url:
        from engine.usage import usage_totals

        client = redis.Redis.from_url(settings.broker_url)
        state = RunState(client)
        if state.exists(run_id):
            done, total = state.totals(run_id)
            return {
                "run_id": run_id,
                "source": "broker",
                "total": total,
                "states": state.counts(run_id),
                "done": state.reduced(run_id),
                "terminal": done,
                "usage": usage_totals(client, run_id),
            }
    manifest = load_manifest(store, run_id)
    from engine.collect import collect_outcomes

    outcomes = collect_outcomes(store, manifest)
    counts = {s.value: 0 for s in ShardState}
    for o in outcomes.values():
        counts[o.state.value] += 1
    counts[ShardState.QUEUED.value] += len(manifest.plan.shards) - len(outcomes)
    usage: dict[str, object] = {}
    if store.exists(result_key(run_id)):
        result = RunResult.model_validate_json(store.get(result_key(run_id)))
        usage = {k: v.model_dump() for k, v in result.usage.items()}
    return {
        "run_id": run_id,
        "source": "store",
        "total": len(manifest.plan.shards),
        "states": counts,
        "done": store.exists(result_key(run_id)),
        "terminal": len(outcomes),
        "usage": usage,
    }


def requeue_failed(run_id: str, settings: Settings) -> list[str]:
    """Re-run the infra-failed shards of a run on its live cluster: execute again or grade again."""
    if not settings.broker_url:
        raise ConfigError("resubmit needs the cluster's broker: --broker or SKILL_EVAL_BROKER_URL")
    store = open_store(settings.store)
    manifest = load_manifest(store, run_id)
    state = RunState(redis.Redis.from_url(settings.broker_url))
    shards = state.requeue_failed(run_id)
    enqueue = enqueue_via(settings, manifest)
    for shard_id, back in shards:
        enqueue("execute" if back is ShardState.QUEUED else "grade", run_id, shard_id)
    return [shard_id for shard_id, _ in shards]
