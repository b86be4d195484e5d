"""``skill-eval status RUN`` for a person: shards by state and model usage as tables (``--json``
keeps the record for machines)."""

from __future__ import annotations

import re

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from schemas.summary import RunStatus
from schemas.visible import visible


def waiting_lines(doc: RunStatus) -> list[str]:
    """``status``'s lines on shards waiting without a lease, and the stall, if any."""
    if doc.done or doc.source != "broker" or not (doc.waiting or doc.lease_expired):
        return []
    oldest = f", the oldest sent {doc.waiting_oldest_s:.1f} s ago" if doc.waiting_oldest_s is not None else ""
    expired = f"; lease expired (worker gone): {doc.lease_expired}" if doc.lease_expired else ""
    lines = [f"waiting without a lease: {doc.waiting} shards{oldest}{expired}; in flight: {doc.in_flight}"]
    if doc.stalled:
        idle = doc.idle_s if doc.idle_s is not None else doc.waiting_oldest_s
        lines.append(
            f"STALLED: nothing in flight and no shard started or ended for {idle or 0:.0f} s "
            f"(a live fleet re-sends a lost message within {doc.stall_after_s or 0:.0f} s): "
            "check that workers serve the run's queues"
        )
    return lines


def end_lines(doc: RunStatus) -> list[str]:
    """Why a run ended without a result, or that the store alone cannot say whether it goes on."""
    if doc.done:
        return []
    if doc.end is not None:
        after = f"; `skill-eval report {doc.run_id}` reduces what ended" if doc.end.how == "interrupted" else ""
        return [f"{doc.end.reason}{after}"]
    if doc.source == "store" and doc.lost_by is not None:
        return [
            f"the broker at {doc.lost_by} does not know this run (lost with its data, or expired): it is not"
            f" going on; `skill-eval report {doc.run_id}` gives what was stored, `skill-eval run` again redoes it"
        ]
    if doc.source == "store":
        return ["whether it is still going only its broker knows (--broker, or SKILL_EVAL_BROKER_URL)"]
    return []


def progress_words(doc: RunStatus) -> str:
    """Where the run stands and where that is known from. "running" only on the broker's word: the
    store alone cannot tell a run going on a fleet from one whose command was killed."""
    if doc.done:
        where = "live, from the broker" if doc.source == "broker" else "from the store"
        return f"done ({where})"
    if doc.end is not None:
        return f"{doc.end.label} (from the store)"
    if doc.lost_by is not None:
        return "not going on (unknown to its broker; from the store)"
    if doc.source == "broker":
        return f"{'STALLED' if doc.stalled else 'running'} (live, from the broker)"
    return "not done (from the store)"


def not_ended_words(doc: RunStatus) -> str:
    """The state row of the shards the store holds no end for: queued or running while the run may
    go on; once it is known not to, what became of them (the headline's word, said again)."""
    if doc.end is not None and doc.end.how == "interrupted":
        return "not ended (never will: interrupted)"
    if doc.lost_by is not None:
        return "not ended (lost with the broker)"
    return "not ended (queued or running)"


def status_view(doc: RunStatus, fold: bool = True) -> RenderableType:
    """The run's headline, its shards by state (states with none left out) and its usage per model.

    ``fold``: prose lines fold at the console's width (a terminal); else each stays one line, for
    a pipe or a file, where a break mid-sentence is one the reader's own view did not make.
    """

    def prose(line: str) -> Text:
        return Text(line, overflow="fold") if fold else Text(line, no_wrap=True, overflow="ignore")

    headline = prose(f"run {doc.run_id}: {progress_words(doc)}; {doc.terminal} of {doc.total} shards finished")
    states = Table(box=None, pad_edge=False, show_edge=False)
    states.add_column("state")
    states.add_column("shards", justify="right")
    for state, n in doc.states.items():
        if n:
            states.add_row(state, f"{n:,}")
    if doc.not_sent:
        states.add_row("not sent (run blocked)", f"{doc.not_sent:,}")
    if doc.not_ended:
        states.add_row(not_ended_words(doc), f"{doc.not_ended:,}")
    states.add_row(Text("total", style="bold"), Text(f"{doc.total:,}", style="bold"))
    parts: list[RenderableType] = [headline, Text(""), states]
    notes = [*end_lines(doc), *waiting_lines(doc)]
    if notes:
        parts += [Text(""), *(prose(visible(line)) for line in notes)]
    if doc.usage:
        parts += [Text(""), UsageTable(doc)]
    return Group(*parts)


GAP = 2
"""Spaces between two columns of ``status``'s usage table (rich's padding, none at its edges)."""

NUMBERS = ("calls", "errors", "failed", "tokens in", "tokens out", "cost")
"""The usage table's numeric columns, after the model's."""


def _parts(name: str) -> list[str]:
    """``name`` cut after each separator: the pieces a line of it may end with."""
    return re.findall(r"[^/_.-]*[/_.-]|[^/_.-]+$", name) or [name]


def name_lines(name: str, width: int) -> str:
    """``name`` in lines of at most ``width``, each ending after a ``/``, ``-``, ``_`` or ``.``
    (a part longer than ``width``, with no separator to break at, is cut at ``width``)."""
    lines = [""]
    for part in (p[i : i + width] for p in _parts(name) for i in range(0, len(p), width)):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def _usage_cells(doc: RunStatus) -> list[list[str]]:
    """Each model's row: its name (shown as text, never console markup) and its six figures."""
    rows = []
    for model, u in doc.usage.items():
        cost = u.get("cost_usd")
        rows.append(
            [
                visible(model),
                f"{int(u.get('calls') or 0):,}",
                f"{int(u.get('errors') or 0):,}",  # attempts answered with an error
                f"{int(u.get('failed') or 0):,}",  # calls that spent their retry budget
                f"{int(u.get('prompt_tokens') or 0):,}",
                f"{int(u.get('completion_tokens') or 0):,}",
                "unknown" if cost is None else f"${float(cost):,.4f}",
            ]
        )
    return rows


class UsageTable:
    """``status``'s usage per model, laid out at the width it is printed at.

    A figure is never cut: each numeric column is at least as wide as its widest figure (and its
    header's longest word; a header wraps at its space). The model's name takes the width left,
    broken only after its separators (rich would wrap it at spaces only, and a name has none);
    below the width the figures need, the table is wider than the console, and a terminal wraps
    its lines rather than a number losing a digit.
    """

    def __init__(self, doc: RunStatus) -> None:
        self.rows = _usage_cells(doc)

    def widths(self, width: int) -> list[int]:
        """The columns' widths (model's first) for a console ``width`` columns wide."""
        cells = [max(len(r[i]) for r in self.rows) for i in range(1, len(NUMBERS) + 1)]
        least = [max(cell, *map(len, head.split())) for cell, head in zip(cells, NUMBERS, strict=True)]
        whole = [max(cell, len(head)) for cell, head in zip(cells, NUMBERS, strict=True)]
        name = max(len("model"), *(len(r[0]) for r in self.rows))
        part = max(len(p) for r in self.rows for p in _parts(r[0]))  # the narrowest a name can be broken to
        room = width - GAP * len(NUMBERS)
        name = max(min(name, room - sum(least)), part, len("model"))
        spare = room - name - sum(least)  # what is left lets headers stay on one line, first to last
        numbers = []
        for low, high in zip(least, whole, strict=True):
            grow = max(0, min(high - low, spare))
            spare -= grow
            numbers.append(low + grow)
        return [name, *numbers]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self.widths(options.max_width)
        table = Table(box=None, pad_edge=False, show_edge=False, width=sum(widths) + GAP * len(NUMBERS))
        table.add_column("model", width=widths[0], no_wrap=True)
        for head, w in zip(NUMBERS, widths[1:], strict=True):
            table.add_column(head, justify="right", width=w)
        for name, *figures in self.rows:
            numbers = (Text(f, no_wrap=True, overflow="fold") for f in figures)  # wide enough: never folded
            table.add_row(Text(name_lines(name, widths[0]), no_wrap=True, overflow="fold"), *numbers)
        yield from console.render(table, options.update_width(max(options.max_width, table.width or 0)))
