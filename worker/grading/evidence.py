"""Checked evidence: is the quote a judge gave for a pass really in a tool call or result? Pure.

A pass is only as good as its evidence, and only what the agent *did* can be evidence: the
quote is looked up in the tool call and tool result blocks of the prepared transcript the
judge saw, never in the agent's prose (an agent could otherwise write its own proof). Both
sides are normalised the same way (whitespace collapsed, JSON escapes and quote styles
unified) and then the match is exact: the whole quote occurs in one block, or every
fragment of it between ellipses occurs in one block, in order. There is no similarity
threshold: a near miss such as ``exit=0 3 passed`` against ``exit=1 1 failed`` never counts.

Strict mode turns an unverifiable pass into a fail and says why in ``note``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from schemas.verdict import AssertionVerdict

MIN_FRAGMENT_CHARS = 6  # ellipsis fragments shorter than this prove nothing on their own

_ESCAPES_RE = re.compile(r"\\[nrt]")
_QUOTES_RE = re.compile(r"[\\\"'`\u2018\u2019\u201c\u201d]")
_WS_RE = re.compile(r"\s+")
_ELLIPSIS_RE = re.compile(r"\.\.\.+|\u2026|\[\.\.\.\]")
_BLOCK_RE = re.compile(r"(?m)^(?=\[(?:assistant|tool_call|tool_result|http_call)\])")
STRICT_NOTE = "strict evidence: the quoted evidence was not found in any tool call or result; judged pass was "


def normalise(text: str) -> str:
    """The form both quote and transcript are compared in."""
    text = _ESCAPES_RE.sub(" ", text)
    text = _QUOTES_RE.sub("", text)
    return _WS_RE.sub(" ", text).strip()


def action_blocks(transcript: str) -> list[str]:
    """The ``[tool_call]`` and ``[tool_result]`` blocks of a rendered transcript (prose dropped)."""
    return [b for b in _BLOCK_RE.split(transcript) if b.startswith(("[tool_call]", "[tool_result]", "[http_call]"))]


def _in_order(fragments: Sequence[str], block: str) -> bool:
    at = 0
    for fragment in fragments:
        found = block.find(fragment, at)
        if found < 0:
            return False
        at = found + len(fragment)
    return True


def evidence_found(evidence: str, blocks: Sequence[str] | str) -> bool:
    """True when ``evidence`` is found in one of ``blocks`` under the rules in the module docstring.

    ``blocks`` are tool call and tool result blocks; a whole rendered transcript is split
    into them (its prose left out).
    """
    hay = [normalise(b) for b in (action_blocks(blocks) if isinstance(blocks, str) else blocks)]
    quote = normalise(evidence)
    if not quote:
        return False
    if any(quote in block for block in hay):
        return True
    fragments = [f.strip() for f in _ELLIPSIS_RE.split(quote) if f.strip()]
    if len(fragments) < 2 or any(len(f) < MIN_FRAGMENT_CHARS for f in fragments):
        return False
    return any(_in_order(fragments, block) for block in hay)


def check_evidence(
    verdicts: Sequence[AssertionVerdict], blocks: Sequence[str] | str, *, strict: bool = False
) -> list[AssertionVerdict]:
    """Return ``verdicts`` with ``evidence_verified`` set on every pass (fails stay None).

    In ``strict`` mode a pass whose evidence is not found becomes a fail; its evidence reads
    ``absent: ...`` and ``note`` keeps the judge's original quote.
    """
    hay = [normalise(b) for b in (action_blocks(blocks) if isinstance(blocks, str) else blocks)]
    checked = []
    for verdict in verdicts:
        if not verdict.passed:
            checked.append(verdict)
            continue
        found = evidence_found(verdict.evidence, hay)
        if found or not strict:
            checked.append(verdict.model_copy(update={"evidence_verified": found}))
            continue
        checked.append(
            verdict.model_copy(
                update={
                    "passed": False,
                    "evidence_verified": False,
                    "evidence": "absent: evidence a tool call or result shows (the judge's quote is not in one)",
                    "note": STRICT_NOTE + repr(verdict.evidence[:500]),
                }
            )
        )
    return checked


def verified_share(verdicts: Sequence[AssertionVerdict]) -> float | None:
    """Share of checked passes whose evidence was found; None when no pass was checked."""
    checked = [v.evidence_verified for v in verdicts if v.evidence_verified is not None]
    return sum(checked) / len(checked) if checked else None
