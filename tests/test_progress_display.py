"""The live progress a run shows on the terminal stays readable at 80 columns and at 120."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from producer.launch.progress import RunProgress

RUN_ID = "20261204-220548-359ade84"
COUNTS = {"queued": 10, "executing": 8, "grading": 8, "graded": 12, "executor-failed": 2}
RATES = "openai/scripted-demo-executor: 120 calls/min  openai/scripted-demo-judge: 30 calls/min"


class Clock:
    """A clock the test moves, so the estimate of the time remaining is known."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def rendered(width: int) -> list[str]:
    console = Console(width=width, record=True, force_terminal=True, color_system=None, file=io.StringIO())
    clock = Clock()
    progress = RunProgress(RUN_ID, 40, console, clock=clock)
    progress.show(0, 40, {"queued": 40})
    for done in (6, 12):  # 6 shards per 10 s: 28 left take about 47 s
        clock.now += 10
        progress.show(done, 40, COUNTS, RATES)
    console.print(progress.get_renderable())
    return console.export_text().rstrip("\n").splitlines()


@pytest.mark.parametrize("width", [80, 120])
def test_the_bar_counts_and_eta_are_on_one_row_that_fits(width: int) -> None:
    lines = rendered(width)
    assert all(len(line) <= width for line in lines), lines
    row = lines[0]
    assert "━" in row  # the bar is drawn
    assert "12/40 shards" in row
    assert re.search(r"0:00:20 eta 0:00:[45]\d", row), row  # elapsed, then the time remaining
    assert "0/?" not in "\n".join(lines)  # no second, empty progress row


@pytest.mark.parametrize("width", [80, 120])
def test_the_detail_wraps_below_without_losing_anything(width: int) -> None:
    lines = rendered(width)
    detail = " ".join(line.strip() for line in lines[1:])
    assert f"run {RUN_ID}" in detail
    for state, n in COUNTS.items():
        assert f"{state} {n}" in detail
    assert "openai/scripted-demo-executor: 120 calls/min" in detail
    assert "openai/scripted-demo-judge: 30 calls/min" in detail
