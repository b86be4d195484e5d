"""``skill-eval status RUN`` for a person: shards by state and model usage as tables (``--json``
keeps the record for machines)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from schemas.summary import RunStatus


def status_view(doc: RunStatus) -> RenderableType:
    """The run's headline, its shards by state (states with none left out) and its usage per model."""
    where = "live, from the broker" if doc.source == "broker" else "from the store"
    progress = "done" if doc.done else "running"
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
