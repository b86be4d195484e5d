"""The runs list's lines: one per run, from its outline and the reducer's stored result, or the
line of a run this version cannot read. Figures are the reducer's, never recomputed here."""

from __future__ import annotations

from typing import Any

from schemas.manifest import RunOutline
from schemas.run_end import RunEnd
from viewer.run_figures import plugin_note, trigger_headline


def run_summary(
    outline: RunOutline,
    result: dict[str, Any] | None,
    end: RunEnd | None,
    progress: str | None,
    broker: str | None = None,
) -> dict[str, Any]:
    """One line of the runs list, from the run's outline, its slim result (None: not reduced) and
    how a run without a result ended (None: it did not, or not that anyone recorded).

    ``progress`` is the broker's word (``ViewerData._progress`` in :mod:`viewer.data`; None: no broker knows the run,
    so whether it goes on is not known and it is called neither running nor stalled). A run its
    checks refused reads as BLOCKED with their named error; one whose embedded run stopped, as
    ``interrupted`` and why (``ended``). One the broker given (``broker``, its URL with the
    password hidden) does not know (``progress`` ``lost``), with no result and no recorded end,
    is not going on: ``lost_by`` names that broker.
    """
    m = outline.manifest
    r = result
    end = end if r is None and progress not in ("running", "stalled") else None  # the broker's word first
    cost = 0.0
    known_cost = False
    if r is not None:
        for u in r["usage"].values():
            if u.get("cost_usd") is not None:
                cost += u["cost_usd"]
                known_cost = True
    return {
        "run_id": m.plan.run_id,
        "when": m.plan.created_at.isoformat(),
        "repo": m.repo,
        "branch": m.branch,
        "commit": m.sha7,
        "skills": [b.skill for b in m.plan.bundles],
        "models": list(m.plan.models),
        "judges": list(m.plan.judges),
        "harness": m.executor_label,
        "arms": list(m.plan.variants),
        "shards": outline.shard_count,
        "verdict": r["verdict"] if r else "BLOCKED" if end and end.how == "blocked" else None,
        "reasons": list(r["reasons"]) if r else [end.reason] if end else [],
        "rate": _headline(r) if r else None,
        "cost_usd": round(cost, 6) if known_cost else None,
        "running": progress == "running",
        "stalled": progress == "stalled",
        "ended": end.how if end else None,
        "lost_by": broker if progress == "lost" and r is None and end is None else None,
    }


def unreadable_summary(run_id: str, why: str) -> dict[str, Any]:
    """The runs list's line for a run this version cannot read: listed and named, never hidden."""
    return {
        "run_id": run_id,
        "when": "",
        "repo": None,
        "branch": "",
        "commit": "",
        "skills": [],
        "models": [],
        "judges": [],
        "harness": "",
        "arms": [],
        "shards": None,
        "verdict": None,
        "reasons": [],
        "rate": None,
        "cost_usd": None,
        "running": False,
        "stalled": False,
        "ended": None,
        "lost_by": None,
        "unreadable": why,
    }


CARRIED_MARK = " in its earlier report "
"""What a carried report's reason says (``CarriedReport.reason``): read from a result stored
before it listed its carried reports apart."""


def _headline(r: dict[str, Any]) -> str:
    """The reducer's own headline: the suite's with several corpora, else the one corpus's (a
    plugin eval suite's with what decided it: its assertions' rate does not); a trigger run's
    figures. Then each corpus left out for its earlier report, with the verdict it carried: a run
    whose corpora that ran all passed may FAIL for one of those, and its line says why."""
    if r.get("triggers") is not None:
        ran = trigger_headline(r["triggers"])
    elif r.get("aggregate_headline"):
        ran = str(r["aggregate_headline"])
    else:
        ran = "; ".join(f"{s['skill']} [{s['variant']}]: {s['headline']}{plugin_note(s, r)}" for s in r["skills"])
    return "; ".join([part for part in (ran,) if part] + _carried(r))


def _carried(r: dict[str, Any]) -> list[str]:
    """``<skill>: FAIL carried from an earlier report (<file>)`` per corpus left out for its report."""
    if "carried" in r:
        found = [(c["skill"], c["verdict"], c["report"]) for c in r["carried"]]
    else:
        found = []
        for reason in r["reasons"]:
            head, _, rest = reason.partition(CARRIED_MARK)
            skill, _, verdict = head.rpartition(": ")
            if rest and skill:
                found.append((skill, verdict, rest.split(" (--force")[0]))
    return [
        f"{skill}: {verdict} carried from an earlier report ({report.rsplit('/', 1)[-1]})"
        for skill, verdict, report in found
    ]
