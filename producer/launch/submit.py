"""Submitting a run: snapshot the repo into the store, write the manifest, register shards, enqueue."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from engine.broker import PUBLISH_BATCH
from engine.gitcmd import SAFE_CONFIG, git_env
from engine.records import put_manifest
from engine.snapshot import snapshot_repo
from engine.state import RunState
from engine.store import ArtifactStore
from producer.plan.case_terms import check_case_terms
from producer.plan.repo_terms import check_repo_terms
from schemas.manifest import RunManifest, RunSettings
from schemas.shard import BASELINE_PREFIX, CURRENT, GUTTED, NO_SKILL, SAME, RunPlan

EnqueueShard = Callable[[str, str], None]
"""enqueue(run_id, shard_id): put one execute message on the queue."""
Batch = Callable[[], AbstractContextManager[object]]
"""A context in which messages are buffered and published together when it ends."""


def _git(root: Path, *args: str) -> str:
    # The developer's repo: the product's environment and overriding config (no keys, hooks, fsmonitor).
    config = [arg for item in SAFE_CONFIG for arg in ("-c", item)]
    try:
        out = subprocess.run(
            ["git", *config, "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=10,
            env=git_env(),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "-"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "-"


def build_manifest(
    plan: RunPlan,
    repo_root: Path,
    store: ArtifactStore | None,
    settings: RunSettings,
    *,
    out_dir: str,
    skipped: list[str],
) -> RunManifest:
    """Snapshot the working tree (uncommitted edits included) once; every variant materializes from it.

    ``store`` None skips the snapshot (grade-only runs execute nothing).
    """
    executors = list(plan.harnesses or [settings.executor])
    for executor in executors:
        check_case_terms(plan, executor)
    check_repo_terms(repo_root, executors)
    snapshots: dict[str, str] = {}
    if store is not None:
        key = snapshot_repo(repo_root, store)
        # Baselines clone the snapshot's own .git and check out their ref, so one snapshot serves all.
        snapshots = {
            v: key for v in plan.variants if v in (CURRENT, NO_SKILL, SAME, GUTTED) or v.startswith(BASELINE_PREFIX)
        }
    return RunManifest(
        plan=plan,
        snapshots=snapshots,
        settings=settings,
        repo=str(repo_root),
        out_dir=out_dir,
        project=repo_root.name,
        branch=_git(repo_root, "branch", "--show-current"),
        sha7=_git(repo_root, "rev-parse", "--short=7", "HEAD"),
        skipped=skipped,
    )


def submit(
    manifest: RunManifest,
    store: ArtifactStore,
    state: RunState,
    enqueue: EnqueueShard,
    batch: Batch = contextlib.nullcontext,
    *,
    stored_key: str | None = None,
) -> int:
    """Store the manifest, register every shard as queued, enqueue those newly registered.

    ``stored_key``: the key the manifest is already stored under (the preflight needed it
    first); it is then not serialised and written a second time.

    Idempotent: resubmitting the same run id (a second producer, a retried command) enqueues
    nothing for shards already known. Messages go out ``PUBLISH_BATCH`` at a time inside
    ``batch``; each batch is confirmed to the run state only after it was published, so a
    producer that dies midway leaves its unpublished shards for the reaper to send.
    Returns the number of shards enqueued.
    """
    plan = manifest.plan
    key = stored_key or put_manifest(store, manifest)
    known = state.states(plan.run_id)
    state.register(plan.run_id, [s.shard_id for s in plan.shards], key, plan.created_at.isoformat())
    new = [s.shard_id for s in plan.shards if s.shard_id not in known]
    for start in range(0, len(new), PUBLISH_BATCH):
        chunk = new[start : start + PUBLISH_BATCH]
        with batch():
            for shard_id in chunk:
                enqueue(plan.run_id, shard_id)
        state.mark_sent(plan.run_id, chunk)
    return len(new)
