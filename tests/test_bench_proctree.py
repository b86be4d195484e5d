"""The benchmarks' process-tree sampler: the tree it walks and the peaks it keeps."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench import proctree


@pytest.fixture
def nested() -> object:
    """Three shells, each with a child of its own: a tree two levels deep under this process."""
    procs = [subprocess.Popen(["bash", "-c", "sleep 30 & sleep 30; wait"]) for _ in range(3)]
    deadline = time.monotonic() + 10
    while len(proctree._children_map().get(os.getpid(), [])) < 3 or any(
        len(proctree._children_map().get(p.pid, [])) < 2 for p in procs
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def test_the_children_walk_finds_the_tree_the_full_scan_finds(nested: object, monkeypatch: pytest.MonkeyPatch) -> None:
    assert proctree._PER_TASK_CHILDREN  # this kernel lists children per thread
    walked = sorted(proctree.tree(os.getpid()))
    monkeypatch.setattr(proctree, "_PER_TASK_CHILDREN", False)
    assert sorted(proctree.tree(os.getpid())) == walked
    assert len(walked) >= 1 + 3 * 3  # this process, three shells, two sleeps each


def test_the_watch_keeps_rss_and_pss_peaks_with_pss_read_less_often(nested: object) -> None:
    watch = proctree.TreeWatch(os.getpid(), pss_every=5)
    for _ in range(7):
        watch.sample()
    assert watch.peak_processes >= 10
    assert 0 < watch.peak_pss <= watch.peak_rss
    ballast = bytearray(64 * 1024 * 1024)  # a new RSS peak: PSS is read with it, whatever the count
    ballast[::4096] = b"x" * len(ballast[::4096])
    before = watch.peak_pss
    watch.sample()
    assert watch.peak_pss >= before + 60 * 1024 * 1024
    del ballast


def test_a_watched_command_reports_its_wall_and_peaks() -> None:
    done = proctree.run_watched([sys.executable, "-c", "import time; x = bytearray(50 << 20); time.sleep(0.6)"])
    assert done.returncode == 0 and done.wall_s >= 0.6
    assert done.peak_rss_mb >= 50 and 0 < done.peak_pss_mb <= done.peak_rss_mb
