"""``skill-eval run``: select corpora, plan (with --compare, a baseline variant), snapshot, drive."""

from __future__ import annotations

import functools
from pathlib import Path

from rich.console import Console

from engine.broker import Broker
from engine.records import latest_noise
from engine.settings import Settings
from engine.state import RunState
from engine.store import ArtifactStore, open_store
from producer.launch.cluster import open_cluster
from producer.launch.drive import drive
from producer.launch.submit import build_manifest, submit
from producer.plan.case_terms import check_sandbox_terms
from producer.plan.compare import baseline_record, guard_compare
from producer.plan.planning import arm_variants, new_run_id, plan_run, power_lines
from producer.plan.request import RunRequest, plan_request
from schemas.constants import QUEUE_EXECUTE
from schemas.manifest import RunManifest
from schemas.report import RunResult
from schemas.shard import RunPlan, baseline_variant


def run_evaluation(req: RunRequest, settings: Settings, out: Console, err: Console) -> RunResult | str:
    """Plan, submit and (unless detached) wait and report. Returns the result, or the run id when detached."""
    repo, bundles, skipped = plan_request(req, err if req.detach else out)  # a detached stdout: the run id alone
    variants = arm_variants(req.compare, req.baseline)
    plan = plan_run(
        new_run_id(),
        bundles,
        req.models,
        judges=req.judges,
        epochs=req.epochs,
        sandbox=settings.sandbox,
        variants=variants,
        adaptive=req.adaptive,
        harnesses=req.harnesses,
    )
    check_sandbox_terms(plan)  # before a cluster starts: nothing is stored, nothing sent
    guards: list[str] = []
    if req.compare:
        plan, guards = plan_compare(plan, repo.root, req.compare, req.out, err)
    observed = latest_noise(open_store(settings.store), plan.bundles) if len(plan.variants) > 1 else {}
    # Before the run: what this many cases can detect, with the gate's own test.
    for line in power_lines(plan, observed, req.settings.regression_alpha, req.settings.require_uplift):
        err.print(line, markup=False, highlight=False)

    def submitter(m: RunManifest, st: ArtifactStore, state: RunState, broker: Broker, stored: str | None) -> int:
        enqueue = functools.partial(broker.send, QUEUE_EXECUTE)
        return submit(m, st, state, enqueue, broker.batch, stored_key=stored)

    if not plan.shards:
        return drive(prepare(plan, repo.root, skipped, guards, req, settings), submitter, req, settings, out, err)
    # The worker boots (Python, Celery, litellm: seconds of CPU) while this process snapshots the
    # repo, instead of after. Nothing is sent before the worker's host check and preflight pass
    # (producer/launch/preflight.py), and a check failing stops the cluster unused (open_cluster's exit).
    with open_cluster(settings, req.workers) as opened:
        manifest = prepare(plan, repo.root, skipped, guards, req, settings)
        return drive(manifest, submitter, req, settings, out, err, opened=opened)


def prepare(
    plan: RunPlan, root: Path, skipped: list[str], guards: list[str], req: RunRequest, settings: Settings
) -> RunManifest:
    """Snapshot the repo into the manifest (the executor's canary runs on an execute worker, before dispatch)."""
    store = open_store(settings.store)
    manifest = build_manifest(plan, root, store, req.settings, out_dir=str(req.out), skipped=skipped)
    return manifest.model_copy(update={"guards": guards, "reported": req.reported})


def plan_compare(plan: RunPlan, root: Path, ref: str, out_dir: Path, err: Console) -> tuple[RunPlan, list[str]]:
    """Apply the compare guards per skill; write each baseline's audit record; return the plan and guard lines."""
    plan, guards = guard_compare(plan, root, ref)
    for line in guards:
        err.print(line, markup=False)
    compared = {s.skill for s in plan.shards if s.variant == baseline_variant(ref)}
    for skill in [b.skill for b in plan.bundles if b.skill in compared]:
        context_dir = out_dir.parent / "context"
        context_dir.mkdir(parents=True, exist_ok=True)
        record = context_dir / f"skill-eval-baseline-{skill}-{plan.run_id}.txt"
        record.write_bytes(baseline_record(root, ref, skill))
    return plan, guards
