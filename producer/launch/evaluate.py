"""``skill-eval run``: select corpora, plan (with --compare, a baseline variant), snapshot, drive."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from engine.records import latest_noise
from engine.settings import Settings
from engine.state import RunState
from engine.store import ArtifactStore, open_store
from producer.launch.cluster import Publisher, open_cluster
from producer.launch.drive import drive
from producer.launch.submit import build_manifest, submit
from producer.plan.compare import baseline_record, check_compare, restrict_baseline
from producer.plan.planning import arm_variants, new_run_id, plan_run, power_lines
from producer.plan.request import RunRequest, plan_request
from schemas.manifest import RunManifest, RunSettings
from schemas.report import RunResult
from schemas.shard import RunPlan
from schemas.status import SandboxMode


def run_evaluation(req: RunRequest, settings: Settings, out: Console, err: Console) -> RunResult | str:
    """Plan, submit and (unless detached) wait and report. Returns the result, or the run id when detached."""
    if settings.sandbox is SandboxMode.BWRAP and not settings.broker_url:
        check_host_sandbox()  # embedded run: this host executes; cluster workers check their own
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
    observed = latest_noise(open_store(settings.store), plan.bundles) if len(plan.variants) > 1 else {}
    for line in power_lines(plan, observed):  # before the run: what this many cases can detect
        err.print(line, markup=False, highlight=False)

    def submitter(m: RunManifest, st: ArtifactStore, state: RunState, send: Publisher, stored: str | None) -> int:
        enqueue = functools.partial(send, "execute")
        return submit(m, st, state, enqueue, send.batch, stored_key=stored)

    if not plan.shards:
        return drive(prepare(plan, repo.root, skipped, guards, req, settings), submitter, req, settings, out, err)
    # The worker boots (Python, Celery, litellm: seconds of CPU) while this process snapshots the
    # repo and probes the executor, instead of after. Nothing is sent before the preflight passes,
    # and a check failing here stops the cluster unused (open_cluster's exit).
    with open_cluster(settings, req.workers) as opened:
        manifest = prepare(plan, repo.root, skipped, guards, req, settings)
        return drive(manifest, submitter, req, settings, out, err, opened=opened)


def prepare(
    plan: RunPlan, root: Path, skipped: list[str], guards: list[str], req: RunRequest, settings: Settings
) -> RunManifest:
    """Snapshot the repo into the manifest; probe an external or harness executor (BLOCKED_* when it fails)."""
    store = open_store(settings.store)
    manifest = build_manifest(plan, root, store, req.settings, out_dir=str(req.out), skipped=skipped)
    manifest = manifest.model_copy(update={"guards": guards})
    if req.settings.executor.startswith("cmd:") and plan.shards:
        probe_external_executor(req.settings.executor, settings)
    if plan.shards:
        probe_harness_executor(req.settings, plan.models, settings)
    return manifest


def plan_compare(plan: RunPlan, root: Path, ref: str, out_dir: Path, err: Console) -> tuple[RunPlan, list[str]]:
    """Apply the compare guards per skill; write each baseline's audit record; return the plan and guard lines."""
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


def check_host_sandbox() -> None:
    """Refuse an embedded run, or an execute worker's start, (``BLOCKED_NO_SANDBOX``) when bubblewrap
    cannot work here.

    The probe runs the very bwrap command line the sandbox builds, so it lives with the
    sandbox; this is one of the two imports of the worker room beyond enqueueing (see
    docs/design/layout.md).
    """
    from worker.sandbox import require_sandbox

    require_sandbox(SandboxMode.BWRAP)


def probe_external_executor(option: str, settings: Settings) -> None:
    """The contract's canary: prove transcript capture before a batch, or raise BLOCKED_NO_TRANSCRIPT_CAPTURE.

    It runs the external agent CLI on this host, which is why it imports the worker room
    (the known exception in docs/design/layout.md).
    """
    from worker.executor.canary import probe_transcript_capture
    from worker.executor.external import ExternalExecutor

    probe_transcript_capture(
        ExternalExecutor.from_option(option), mode=settings.sandbox, parent=settings.workspaces_dir
    )


def probe_harness_executor(run_settings: RunSettings, models: Sequence[str], settings: Settings) -> None:
    """For a harness executor: BLOCKED_NO_HARNESS unless its binary is here, then its canary once per model.

    Skipped for a cluster submitter that has no binary of its own (each worker then reports a
    missing one as executor-failed).
    """
    from harnesses.registry import harness_for

    harness = harness_for(run_settings.executor)
    if harness is None:
        return
    # Only now the worker room's canary: importing it costs ~0.3 s of CPU, on the path to the
    # first model call of every run with the built-in agent.
    from schemas.errors import NoHarness
    from worker.executor.canary import probe_harness_capture
    from worker.executor.harness_binary import find_binary

    try:
        find_binary(harness)
    except NoHarness:
        if settings.broker_url:
            return
        raise
    config = run_settings.models
    for model in models:
        probe_harness_capture(
            harness, model, config.for_model(model), mode=settings.sandbox, parent=settings.workspaces_dir
        )
