"""The offline server as a process, for a user's own repo: ``--calibrated-judge`` lets the run's
judge calibration pass honestly (the rules decide the calibration trajectories correctly)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from tests.conftest import ROOT
from tests.model_support import make_client
from worker.grading.calibration import calibrate

JUDGE = "openai/scripted-demo-judge"


@contextmanager
def offline_process(*flags: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "testkit.offline_server", "--scenario", "demo", *flags],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize(("flags", "passes"), [(["--calibrated-judge"], True), ([], False)])
def test_the_calibrated_judge_flag_decides_the_calibration_cases(
    redis_client: redis.Redis, flags: list[str], passes: bool
) -> None:
    with offline_process(*flags) as url:
        result = calibrate(make_client(redis_client, url), JUDGE)
    assert result.ok is passes, result
