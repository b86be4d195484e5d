"""Submitting a run: snapshot the repo into the store, write the manifest, register shards, enqueue."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from engine.snapshot import snapshot_repo
from engine.state import RunState
from engine.store import ArtifactStore
from schemas.manifest import RunManifest, RunSettings, manifest_key
from schemas.shard import BASELINE_PREFIX, CURRENT, NO_SKILL, RunPlan

Enqueue = Callable[[str, str], None]
"""enqueue(run_id, shard_id): put one execute message on the queue."""


def _git(root: Path, *args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
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
    snapshots: dict[str, str] = {}
    if store is not None:
        key = snapshot_repo(repo_root, store)
        # Baselines clone the snapshot's own .git and check out their ref, so one snapshot serves all.
        snapshots = {v: key for v in plan.variants if v in (CURRENT, NO_SKILL) or v.startswith(BASELINE_PREFIX)}
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


def submit(manifest: RunManifest, store: ArtifactStore, state: RunState, enqueue: Enqueue) -> int:
    """Store the manifest, register every shard as queued, enqueue those newly registered.

    Idempotent: resubmitting the same run id enqueues nothing for shards already known.
    Returns the number of shards enqueued.
    """
    plan = manifest.plan
    key = manifest_key(plan.run_id)
    store.put(key, manifest.model_dump_json().encode())
    known = state.states(plan.run_id)
    state.register(plan.run_id, [s.shard_id for s in plan.shards], key, plan.created_at.isoformat())
    count = 0
    for shard in plan.shards:
        if shard.shard_id not in known:
            enqueue(plan.run_id, shard.shard_id)
            count += 1
    return count
