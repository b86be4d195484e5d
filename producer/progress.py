"""Waiting for a run: a Rich progress display fed by shard states and usage counters in Redis."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from engine.state import RunState
from schemas.errors import SkillEvalError
from schemas.status import ShardState


class RunStalled(SkillEvalError):
    """The run stopped making progress (the embedded workers died, the broker forgot the run)."""

    status = "RUN_STALLED"


def _state_text(counts: dict[str, int]) -> str:
    order = [s.value for s in ShardState]
    return "  ".join(f"{k} {counts[k]}" for k in order if counts.get(k))


def _rate_text(usage: dict[str, dict[str, float]], elapsed: float) -> str:
    if elapsed <= 0:
        return ""
    return "  ".join(f"{m}: {float(u.get('calls', 0)) * 60 / elapsed:.0f} calls/min" for m, u in sorted(usage.items()))


def wait_for_run(
    state: RunState,
    run_id: str,
    *,
    console: Console,
    usage: Callable[[], dict[str, dict[str, float]]] | None = None,
    alive: Callable[[], bool] | None = None,
    poll_s: float = 0.25,
    show: bool = True,
) -> None:
    """Block until the run is reduced; raise RunStalled when ``alive`` says the workers are gone."""
    start = time.monotonic()
    _, total = state.totals(run_id)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[states]}"),
    )
    with Progress(*columns, console=console, disable=not show, transient=False) as progress:
        task = progress.add_task(f"run {run_id}", total=total, states="")
        rate_task = progress.add_task("models", total=None, states="", visible=usage is not None)
        while True:
            done, total = state.totals(run_id)
            counts = state.counts(run_id)
            progress.update(task, completed=done, total=total, states=_state_text(counts))
            if usage is not None:
                progress.update(rate_task, states=_rate_text(usage(), time.monotonic() - start))
            if state.reduced(run_id):
                return
            if alive is not None and not alive():
                raise RunStalled("the workers stopped before the run finished")
            if not state.exists(run_id):
                # A broker restarted without persistence forgets the run: say so instead of waiting forever.
                raise RunStalled(f"the broker no longer knows run {run_id} (restarted without persistence?)")
            state.wait_reduced(run_id, poll_s)  # woken the moment the reduce ends, not a poll later
