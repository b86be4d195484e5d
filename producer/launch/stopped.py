"""A command stopped while it drives a run: what it records and what it says on its way out.

Ctrl-C (SIGINT), SIGTERM (what a cancelled CI job sends) and SIGHUP (a closed terminal) stop the
command the same way: they unwind, so the embedded cluster stops its private broker and workers,
and the run is left in a state that reads true. A run nothing will run any more (its embedded
cluster goes with the command, no shard of it was sent yet, or its broker lost it) has its end
recorded ``interrupted``; a run on a fleet goes on without the command that submitted it, and the
command says how to follow it. Either way the run's id is printed on stderr (as a refused run's
is): the stored run is found only by it. The exit code is the shell's for the signal (130, 143,
129): a stopped wait is not a verdict.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engine.records import put_run_end
from engine.store import ArtifactStore
from producer.launch.progress import RunStalled
from schemas.manifest import manifest_key
from schemas.run_end import RunEnd


class Stopped(SystemExit):
    """SIGTERM or SIGHUP arrived: the command unwinds as Ctrl-C makes it, and exits 128 plus the
    signal's number, as a shell reports a process that signal ended."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signal_name = signal.Signals(signum).name


@contextlib.contextmanager
def termination_unwinds() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into :class:`Stopped` while a run is driven.

    Python's default for them ends the process on the spot, skipping every ``finally``: a
    cancelled CI job or a closed terminal would leave the private redis-server and the worker
    processes running for good, and the run unrecorded. Unwinding lets the cluster stop them and
    :func:`ended_if_stopped` record and name the run.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def unwind(signum: int, _frame: object) -> None:
        raise Stopped(signum)

    previous = {sig: signal.signal(sig, unwind) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


NOTHING_RUNS_IT = "nothing runs it any more, so its end is recorded interrupted"
"""What became of a run its stopped command ran on its own cluster (docs/usage.md says it too)."""


@dataclass
class Driving:
    """The run a command drives, as far as stopping it goes."""

    run_id: str
    embedded: bool
    sent: bool = False
    """Whether its shards' first messages were being sent: from then on a fleet runs it without the command."""


def _why(exc: BaseException, sent: bool) -> str:
    if isinstance(exc, RunStalled):
        return str(exc).splitlines()[0]  # the worker log's tail under it stays in the terminal
    what = exc.signal_name if isinstance(exc, Stopped) else "Ctrl-C"
    return f"{what} before the run finished" if sent else f"{what} before any shard was sent"


@contextlib.contextmanager
def ended_if_stopped(
    store: ArtifactStore, run_id: str, *, embedded: bool, say: Callable[[str], None] | None = None
) -> Iterator[Driving]:
    """Record the run's end as ``interrupted`` when the command stops (a signal, or the run stalled)
    and nothing else will run it: an embedded run, a run none of whose shards was sent, a run its
    broker lost. A run on a fleet goes on: nothing is recorded, and ``say`` is told how to follow it.
    A run never stored records nothing and is not named. A refused run's end is recorded by its
    checks (producer/launch/preflight.py)."""
    driving = Driving(run_id, embedded)
    try:
        yield driving
    except (KeyboardInterrupt, Stopped, RunStalled) as exc:
        if not store.exists(manifest_key(run_id)):
            raise
        goes_on = not embedded and driving.sent and not isinstance(exc, RunStalled)
        why = _why(exc, driving.sent)
        if not goes_on:
            put_run_end(store, RunEnd(run_id=run_id, how="interrupted", reason=why))
        if say is not None:
            say(f"run: {run_id}")
            if goes_on:
                say(
                    "only this command's wait stopped: the run goes on on its fleet; "
                    f"`skill-eval status {run_id}` follows it, `skill-eval report {run_id}` writes its reports"
                )
            elif not driving.sent:
                say(f"{why}: nothing ran, and its end is recorded interrupted; `skill-eval run` again to run it")
            elif not isinstance(exc, RunStalled):  # a stall's own error follows with its detail
                say(f"{why}: {NOTHING_RUNS_IT}; `skill-eval report {run_id}` reduces what ended")
        raise
