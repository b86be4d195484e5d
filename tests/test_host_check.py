"""The host check an execute worker answers before dispatch, and the named error it carries back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.node import WorkerNode
from producer.corpus.repo import Repo
from producer.plan.planning import plan_run
from schemas.errors import BadCorpus, BlockedError, NoHarness, NoSandbox, NoTranscriptCapture, blocked_error
from schemas.manifest import RunManifest, RunSettings
from schemas.preflight import HostCheckReport, needs_canary, needs_host_check
from schemas.status import SandboxMode
from tests.conftest import EXAMPLE_REPO


@pytest.mark.parametrize("cls", [NoSandbox, NoHarness, NoTranscriptCapture])
def test_a_named_error_sent_back_by_status_is_raised_as_itself(cls: type[BlockedError]) -> None:
    error = HostCheckReport(worker="w:1", status=cls.status, detail="why").error()
    assert type(error) is cls and str(error) == f"{cls.status}: why"


def test_an_unknown_or_richer_status_comes_back_as_a_plain_block_naming_it() -> None:
    assert str(blocked_error("BLOCKED_FROM_THE_FUTURE", "x")) == "BLOCKED: BLOCKED_FROM_THE_FUTURE: x"
    assert type(blocked_error(BadCorpus.status, "x")) is BlockedError  # built from more than a detail


def test_a_passing_host_has_no_error_and_a_check_that_could_not_run_is_one() -> None:
    assert HostCheckReport(worker="w:1").error() is None
    error = HostCheckReport(worker="w:1", detail="ArtifactMissing: manifest").error()
    assert error is not None and "could not run: ArtifactMissing" in str(error)


def manifest(executor: str, sandbox: SandboxMode = SandboxMode.BWRAP) -> RunManifest:
    bundle = Repo(EXAMPLE_REPO).load("evals/commit-message.evals.json")
    plan = plan_run("20260101-000000-00000000", [bundle], ["m"], judges=["j"], sandbox=sandbox)
    return RunManifest(plan=plan, snapshots={"current": "s.tar"}, settings=RunSettings(executor=executor))


@pytest.mark.parametrize(
    ("executor", "sandbox", "embedded", "canary", "checked"),
    [
        ("agent", SandboxMode.BWRAP, True, False, True),  # this host executes: its sandbox first
        ("agent", SandboxMode.BWRAP, False, False, False),  # a cluster's workers checked theirs at start
        ("agent", SandboxMode.NONE, True, False, False),
        ("cmd:my-agent --json", SandboxMode.NONE, False, True, True),
        ("claude-code", SandboxMode.BWRAP, False, True, True),
        ("recorded:/tmp/rec", SandboxMode.BWRAP, True, False, False),  # grading recordings runs nothing
    ],
)
def test_which_runs_an_execute_worker_checks_its_host_for(
    executor: str, sandbox: SandboxMode, embedded: bool, canary: bool, checked: bool
) -> None:
    m = manifest(executor, sandbox)
    assert needs_canary(m) is canary
    assert needs_host_check(m, embedded=embedded) is checked


def test_a_worker_started_to_check_its_sandbox_refuses_to_start_without_one(tmp_path: Path) -> None:
    """``skill-eval worker`` on a host without bubblewrap: the worker process says the named error and exits 2."""
    cmd = WorkerNode.serving("execute", 1, "w@test").command(check_sandbox=True)
    assert "--check-sandbox" in cmd
    empty = tmp_path / "bin"
    empty.mkdir()  # no bwrap, no util-linux helpers on this PATH
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={"PATH": str(empty)}, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("BLOCKED_NO_SANDBOX: ") and "Traceback" not in done.stderr
    assert WorkerNode.serving("execute", 1, "w@test").command()[-2:] == ["worker.boot", cmd[-1]]


def test_the_boot_refuses_an_unknown_argument() -> None:
    done = subprocess.run(
        [sys.executable, "-P", "-m", "worker.boot", "--other", "{}"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "usage:" in done.stderr
