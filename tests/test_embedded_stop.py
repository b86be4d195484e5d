"""Stopping the embedded cluster leaves nothing of a worker's process group running."""

from __future__ import annotations

import subprocess
import time

from producer.launch.embedded import _sweep_group


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_child_that_outlives_its_worker_is_killed_with_the_group() -> None:
    # The leader starts a child that ignores SIGTERM and exits at once: the group outlives it.
    leader = subprocess.Popen(
        ["bash", "-c", "trap '' TERM; sleep 300 >/dev/null & echo $!"], stdout=subprocess.PIPE, start_new_session=True
    )
    assert leader.stdout is not None
    with leader.stdout:
        child = int(leader.stdout.readline())
    leader.wait(10)
    assert _alive(child), "the child should outlive its leader before the sweep"
    started = time.monotonic()
    _sweep_group(leader.pid)
    assert not _alive(child)
    assert time.monotonic() - started < 5


def test_sweeping_a_group_that_is_gone_returns_at_once() -> None:
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait(10)
    started = time.monotonic()
    _sweep_group(proc.pid)
    assert time.monotonic() - started < 1
