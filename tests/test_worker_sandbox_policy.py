"""A worker configured for bubblewrap never runs a shard unconfined because a submitter asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.settings import Settings
from producer.corpus.repo import Repo
from producer.plan.planning import plan_run
from schemas.errors import NoSandbox
from schemas.manifest import RunManifest
from schemas.status import SandboxMode
from tests.conftest import EXAMPLE_REPO
from worker.context import Context
from worker.pipeline import run_executor


def manifest(sandbox: SandboxMode) -> RunManifest:
    bundle = Repo(EXAMPLE_REPO).load("evals/commit-message.evals.json")
    plan = plan_run("20260101-000000-00000000", [bundle], ["m"], judges=["j"], sandbox=sandbox)
    return RunManifest(plan=plan, snapshots={"current": "snapshots/none.tar"})


def test_a_bwrap_worker_refuses_a_shard_submitted_with_sandbox_none(tmp_path: Path) -> None:
    ctx = Context(Settings(store=str(tmp_path / "store"), workdir=tmp_path / "work", sandbox=SandboxMode.BWRAP))
    m = manifest(SandboxMode.NONE)
    with pytest.raises(NoSandbox, match="this worker requires the bwrap sandbox"):
        run_executor(ctx, m, m.plan.shards[0].shard_id)
    assert not (tmp_path / "work").exists()  # refused before any workspace was made
