"""``skill-eval status RUN`` for a person: shards by state and model usage as tables (``--json``
keeps the record for machines)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from schemas.summary import RunStatus


def waiting_lines(doc: RunStatus) -> list[str]:
    """``status``'s lines on shards waiting without a lease, and the stall, if any."""
    if doc.done or doc.source != "broker" or not doc.waiting:
        return []
    oldest = f", the oldest sent {doc.waiting_oldest_s:.1f} s ago" if doc.waiting_oldest_s is not None else ""
    lines = [f"waiting without a lease: {doc.waiting} shards{oldest}; in flight: {doc.in_flight}"]
    if doc.stalled:
        idle = doc.idle_s if doc.idle_s is not None else doc.waiting_oldest_s
        lines.append(
            f"STALLED: nothing in flight and no shard started or ended for {idle or 0:.0f} s "
            f"(a live fleet re-sends a lost message within {doc.stall_after_s or 0:.0f} s): "
            "check that workers serve the run's queues"
        )
    return lines


def status_view(doc: RunStatus) -> RenderableType:
    """The run's headline, its shards by state (states with none left out) and its usage per model."""
    where = "live, from the broker" if doc.source == "broker" else "from the store"
    progress = "done" if doc.done else "STALLED" if doc.stalled else "running"
    headline = Text(
        f"run {doc.run_id}: {progress} ({where}); {doc.terminal} of {doc.total} shards finished",
        overflow="fold",
    )
    states = Table(box=None, pad_edge=False, show_edge=False)
    states.add_column("state")
    states.add_column("shards", justify="right")
    for state, n in doc.states.items():
        if n:
            states.add_row(state, f"{n:,}")
    states.add_row(Text("total", style="bold"), Text(f"{doc.total:,}", style="bold"))
    parts: list[RenderableType] = [headline, Text(""), states]
    waiting = waiting_lines(doc)
    if waiting:
        parts += [Text(""), *(Text(line, overflow="fold") for line in waiting)]
    if doc.usage:
        parts += [Text(""), _usage_table(doc)]
    return Group(*parts)


def _usage_table(doc: RunStatus) -> Table:
    usage = Table(box=None, pad_edge=False, show_edge=False)
    usage.add_column("model", overflow="fold")
    for name in ("calls", "tokens in", "tokens out", "cost"):
        usage.add_column(name, justify="right")
    for model, u in doc.usage.items():
        cost = u.get("cost_usd")
        usage.add_row(
            model,
            f"{int(u.get('calls') or 0):,}",
            f"{int(u.get('prompt_tokens') or 0):,}",
            f"{int(u.get('completion_tokens') or 0):,}",
            "unknown" if cost is None else f"${float(cost):,.4f}",
        )
    return usage
