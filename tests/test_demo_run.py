"""`make demo` end to end: the bundled example evaluated offline ends with its verdict, and that
verdict holds against the threshold the demo says it sets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from producer.commands.demo import DEMO_THRESHOLD

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_demo_passes_its_own_threshold_and_ends_with_the_verdict(tmp_path: Path) -> None:
    env = {**os.environ, "SKILL_EVAL_RUN_LOG": str(tmp_path / "runs.log"), "SKILL_EVAL_STORE": str(tmp_path / "store")}
    done = subprocess.run(
        [sys.executable, "-m", "producer.commands.demo", "--out", str(tmp_path / "reports")],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "verdict: PASS"
    assert f"threshold: {float(DEMO_THRESHOLD)} (--fail-under)" in lines
    # Honest about what it set and what failed: the scripted model fails some assertions on purpose.
    assert any("fails some assertions on purpose" in line for line in lines)
    corpora = [line for line in lines if line.startswith("skill: ")]
    assert len(corpora) == 2 and all(line.endswith("  PASS") for line in corpora), corpora
    assert any(line.startswith("failing assertions: ") for line in lines)
