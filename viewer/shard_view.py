"""One shard as its page shows it: the trajectory cut into parts, with each judge's evidence marked where it occurs.

A judge quotes its evidence from the transcript the grader read (``Trajectory.render``): a quote
may carry that rendering's ``[tool_call]`` or ``[assistant]`` prefix, which the page's events do
not show, so a quote is looked for as given and then without such a prefix.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from schemas.label import COMBINED
from schemas.outcome import ShardOutcomeRecord
from schemas.shard_outcome import skill_loaded
from schemas.trajectory import AssistantEvent, ToolCallEvent, Trajectory
from schemas.verdict import AssertionVerdict, ShardGrade
from viewer.rows import Row

FOLD_CHARS = 2000
"""An event longer than this is folded (opened when it holds evidence)."""
FOLD_LINES = 30
MAX_MARKS = 50
"""Occurrences of one quote marked per event."""
_PREFIX = re.compile(r"^\s*(?:\[(?:assistant|tool_call)\]\s*|\[tool_result\][^\n]*\n)")


def _quotes(grade: ShardGrade | None) -> list[tuple[int, str]]:
    """(assertion number from 1, quote) of every pass any judge gave with evidence."""
    if grade is None:
        return []
    out = []
    for answers in [grade.verdicts, *(j.verdicts for j in grade.judges)]:
        for i, v in enumerate(answers):
            quote = v.evidence.strip()
            if v.passed and quote and not quote.lower().startswith("absent"):
                out.append((i + 1, quote))
    return sorted(set(out))


def _candidates(quote: str) -> list[str]:
    found = [quote]
    stripped = _PREFIX.sub("", quote, count=1).strip()
    if stripped and stripped != quote:
        found.append(stripped)
    longest = max(quote.splitlines() or [quote], key=len).strip()
    if len(longest) >= 8 and longest not in found:
        found.append(_PREFIX.sub("", longest, count=1).strip() or longest)
    return found


def _spans(text: str, quotes: list[tuple[int, str]]) -> list[tuple[int, int, int]]:
    spans = []
    for n, quote in quotes:
        for candidate in _candidates(quote):
            if not candidate or candidate not in text:
                continue
            start = 0
            for _ in range(MAX_MARKS):
                at = text.find(candidate, start)
                if at < 0:
                    break
                spans.append((at, at + len(candidate), n))
                start = at + len(candidate)
            break
    return spans


def mark(text: str, quotes: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """``text`` cut into parts; a part inside evidence lists the assertion numbers it proves."""
    spans = _spans(text, quotes)
    if not spans:
        return [{"text": text, "marks": []}]
    cuts = sorted({0, len(text), *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    pieces: list[tuple[str, list[int]]] = []
    for a, b in itertools.pairwise(cuts):
        marks = sorted({n for s, e, n in spans if s <= a and b <= e})
        if pieces and pieces[-1][1] == marks:
            pieces[-1] = (pieces[-1][0] + text[a:b], marks)
        else:
            pieces.append((text[a:b], marks))
    return [{"text": t, "marks": m} for t, m in pieces]


def _event(event: Any, names: dict[str, str], quotes: list[tuple[int, str]]) -> dict[str, Any]:
    if isinstance(event, AssistantEvent):
        doc: dict[str, Any] = {"kind": "assistant", "title": "assistant"}
        text = event.text
    elif isinstance(event, ToolCallEvent):
        doc = {"kind": "tool_call", "title": f"tool call: {event.name}", "call_id": event.call_id}
        text = f"{event.name}({json.dumps(event.arguments, ensure_ascii=False, sort_keys=True)})"
    else:
        head = f"result of {names.get(event.call_id, '?')}"
        if event.exit_code is not None:
            head += f" (exit {event.exit_code})"
        if event.limit:
            head += f", limit: {event.limit}"
        if event.truncated:
            head += ", truncated"
        doc = {"kind": "tool_result", "title": head, "call_id": event.call_id}
        text = event.output
    parts = mark(text, quotes)
    doc["parts"] = parts
    doc["chars"] = len(text)
    doc["long"] = len(text) > FOLD_CHARS or text.count("\n") > FOLD_LINES
    doc["marked"] = sorted({n for p in parts for n in p["marks"]})
    return doc


def trajectory_document(trajectory: Trajectory, grade: ShardGrade | None) -> dict[str, Any]:
    names = {e.call_id: e.name for e in trajectory.events if isinstance(e, ToolCallEvent)}
    quotes = _quotes(grade)
    return {
        "events": [_event(e, names, quotes) for e in trajectory.events],
        "end_reason": trajectory.end_reason.value,
        "executor": trajectory.executor,
        "sandbox": trajectory.sandbox.value,
        "usage": trajectory.usage.model_dump(mode="json"),
        "rejected_calls": list(trajectory.rejected_calls),
        "skill_activated": skill_loaded(trajectory.skill, trajectory.skill_activated, trajectory.skills_fired),
        "skills_fired": trajectory.skills_fired,
        "final_files": sorted(trajectory.final_files),
    }


def _verdict(v: AssertionVerdict | None) -> dict[str, Any] | None:
    return v.model_dump(mode="json") if v is not None else None


def assertion_documents(texts: list[str], grade: ShardGrade | None) -> list[dict[str, Any]]:
    count = max(len(texts), len(grade.verdicts) if grade else 0)
    out = []
    for i in range(count):
        combined = grade.verdicts[i] if grade and i < len(grade.verdicts) else None
        judges = [
            {"judge": j.judge, **(_verdict(j.verdicts[i]) or {})}
            for j in (grade.judges if grade else [])
            if i < len(j.verdicts)
        ]
        text = texts[i] if i < len(texts) else (combined.text if combined else "")
        # With one judge the combined verdict is that judge's answer: each answer is shown once.
        shown = judges if len(judges) == 1 else [{"judge": COMBINED, **v} for v in [_verdict(combined)] if v] + judges
        out.append({"n": i + 1, "text": text, "verdict": _verdict(combined), "judges": judges, "answers": shown})
    return out


def shard_document(
    row: Row,
    texts: list[str],
    grade: ShardGrade | None,
    outcome: ShardOutcomeRecord | None,
    trajectory: Trajectory | None,
) -> dict[str, Any]:
    assertions = assertion_documents(texts, grade)
    return {
        "shard": row.as_json(),
        "outcome": outcome.model_dump(mode="json") if outcome else None,
        "assertions": assertions,
        "deterministic": [a for a in assertions if a["verdict"] and a["verdict"]["check"] == "deterministic"],
        "judges": [
            {"judge": j.judge, "state": j.state.value, "error": j.error, "raw_answers": j.raw_answers}
            for j in (grade.judges if grade else [])
        ],
        "grade_error": grade.error if grade else "",
        "trajectory": trajectory_document(trajectory, grade) if trajectory else None,
    }
