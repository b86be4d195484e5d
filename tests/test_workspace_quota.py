"""The workspace quota's measurement and its watch, on a real filesystem and real sandboxes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from schemas.status import SandboxMode
from worker.sandbox import SandboxLimits, open_sandbox
from worker.workspace_quota import WORKSPACE_LIMIT, QuotaWatch, quota_breach, workspace_usage


def test_the_walk_stops_just_past_the_entry_quota_even_inside_one_folder(tmp_path: Path) -> None:
    for i in range(300):
        (tmp_path / f"f{i}").touch()

    assert workspace_usage(tmp_path, stop_after_files=100).files == 101
    assert workspace_usage(tmp_path).files == 300


def test_a_breach_is_a_sentence_and_a_stopped_command_is_one_even_after_the_workspace_shrank(tmp_path: Path) -> None:
    limits = SandboxLimits(workspace_files=10)
    for i in range(11):
        (tmp_path / f"f{i}").touch()

    assert quota_breach(tmp_path, limits) == "the workspace holds 11 entries, over its 10 quota"
    (tmp_path / "f0").unlink()
    assert quota_breach(tmp_path, limits) is None
    assert quota_breach(tmp_path, limits, stopped=True) is not None


def test_the_watch_trips_when_the_workspace_goes_over_and_stops_when_left(tmp_path: Path) -> None:
    limits = SandboxLimits(workspace_files=50)
    with QuotaWatch((tmp_path,), limits, interval_s=0.05) as watch:
        time.sleep(0.2)
        assert not watch.tripped.is_set()
        for i in range(60):
            (tmp_path / f"f{i}").touch()
        assert watch.tripped.wait(5)
    assert not watch._thread.is_alive()


@pytest.mark.parametrize("mode", [SandboxMode.BWRAP, SandboxMode.NONE])
@pytest.mark.parametrize(
    "fill",
    ["seq 1 500 | xargs touch", "head -c 12000000 /dev/zero > junk"],
    ids=["entries", "bytes"],
)
def test_a_command_filling_the_workspace_is_stopped_while_it_runs(tmp_path: Path, mode: SandboxMode, fill: str) -> None:
    """One tool call of the built-in agent (or a CLI's whole loop) cannot run on past the quota."""
    sandbox = open_sandbox(tmp_path, mode, SandboxLimits(workspace_files=200, workspace_mb=10))

    result = sandbox.run(f"{fill}; sleep 60; echo still-running", timeout_s=120)

    assert result.limit == WORKSPACE_LIMIT and result.exit_code is None
    assert result.duration_s < 30 and "still-running" not in result.output


def test_a_command_under_the_quota_is_left_alone(tmp_path: Path) -> None:
    sandbox = open_sandbox(tmp_path, SandboxMode.BWRAP, SandboxLimits(workspace_files=200))

    result = sandbox.run("seq 1 50 | xargs touch; sleep 1.5; echo done")

    assert result.limit is None and result.exit_code == 0 and "done" in result.output
