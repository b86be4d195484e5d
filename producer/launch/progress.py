"""Waiting for a run: a Rich progress display fed by shard states and usage counters in Redis.

The display is one row that fits 80 columns (``run [bar] done/total shards elapsed eta
remaining``) and, under it, a line of detail that wraps rather than pushing the row's numbers
off the screen: the run id, shards by state, calls per minute per model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from engine.redis_retry import with_redis_retry
from engine.state import RunState
from schemas.errors import SkillEvalError
from schemas.status import ShardState

T = TypeVar("T")

BAR_WIDTH = 28
"""Wide enough to read, narrow enough that the bar, the counts and both clocks fit in 80 columns."""


class RunStalled(SkillEvalError):
    """The run stopped making progress (the embedded workers died, the broker forgot the run)."""

    status = "RUN_STALLED"
    lines_kept = True  # the note, then the workers' last log lines, one per line


def _state_text(counts: dict[str, int]) -> str:
    order = [s.value for s in ShardState]
    return "  ".join(f"{k} {counts[k]}" for k in order if counts.get(k))


def _rate_text(usage: dict[str, dict[str, float]], elapsed: float) -> str:
    if elapsed <= 0:
        return ""
    return "  ".join(f"{m}: {float(u.get('calls', 0)) * 60 / elapsed:.0f} calls/min" for m, u in sorted(usage.items()))


class RunProgress(Progress):
    """The run's progress row plus a wrapping detail line (see the module docstring)."""

    def __init__(
        self, run_id: str, total: int, console: Console, *, show: bool = True, clock: Callable[[], float] | None = None
    ) -> None:
        self._detail = f"run {run_id}"  # set first: the base class renders once while it starts
        super().__init__(
            TextColumn("[bold]run"),
            BarColumn(bar_width=BAR_WIDTH),
            MofNCompleteColumn(),
            TextColumn("shards"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
            disable=not show,
            transient=False,
            get_time=clock,
        )
        self.run_id = run_id
        self._task = self.add_task(run_id, total=total)

    def show(self, done: int, total: int, counts: dict[str, int], rates: str = "") -> None:
        """Record the latest figures; the live display redraws from them."""
        self.update(self._task, completed=done, total=total)
        self._detail = "  ".join(part for part in (f"run {self.run_id}", _state_text(counts), rates) if part)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        yield Text(self._detail, overflow="fold")


@dataclass(frozen=True)
class _Look:
    """One reading of a run's progress from Redis."""

    done: int
    total: int
    counts: dict[str, int]
    usage: dict[str, dict[str, float]]
    reduced: bool
    known: bool


def _look(state: RunState, run_id: str, usage: Callable[[], dict[str, dict[str, float]]] | None) -> _Look:
    done, total = state.totals(run_id)
    return _Look(
        done, total, state.counts(run_id), usage() if usage else {}, state.reduced(run_id), state.exists(run_id)
    )


def _read(call: Callable[[], T], retried: bool) -> T:
    return with_redis_retry(call) if retried else call()


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
    """Block until the run is reduced; raise RunStalled when ``alive`` says the workers are gone, or
    when the broker no longer knows the run.

    On a fleet (no ``alive``) every read retries Redis connection errors as the workers do
    (engine/redis_retry.py): a broker restarting under a running run must not end this wait while
    the fleet goes on. An embedded cluster's private Redis never comes back: no retry there.
    """
    start = time.monotonic()
    fleet = alive is None
    first = _read(lambda: _look(state, run_id, None), fleet)
    with RunProgress(run_id, first.total, console, show=show) as progress:
        while True:
            look = _read(lambda: _look(state, run_id, usage), fleet)
            rates = _rate_text(look.usage, time.monotonic() - start) if usage is not None else ""
            progress.show(look.done, look.total, look.counts, rates)
            if look.reduced:
                return
            if alive is not None and not alive():
                raise RunStalled("the workers stopped before the run finished")
            if not look.known:
                # A broker restarted without persistence forgets the run: say so instead of waiting forever.
                raise RunStalled(
                    f"the broker no longer knows run {run_id} (restarted without persistence?): nothing runs it;"
                    f" `skill-eval report {run_id}` gives what was stored, `skill-eval run` again redoes it"
                )
            # woken the moment the reduce ends, not a poll later
            _read(lambda: state.wait_reduced(run_id, poll_s), fleet)
