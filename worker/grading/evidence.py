"""Checked evidence: is the quote a judge gave for a pass really in the transcript? Pure.

A pass is only as good as its evidence. For every ``passed: true`` the quoted evidence is
looked up in the prepared transcript the judge saw, both sides normalised the same way
(whitespace collapsed, JSON escapes and quote styles unified, case folded). A quote counts
as found when, after normalisation, either

* the whole quote occurs, or every fragment of it between ellipses does; or
* the longest run it shares with the transcript is at least ``MIN_COMMON_CHARS`` long and
  covers at least ``MIN_COMMON_SHARE`` of the quote (judges trim and re-punctuate quotes).

Strict mode turns an unverifiable pass into a fail and says why in ``note``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from schemas.verdict import AssertionVerdict

MIN_COMMON_CHARS = 40
MIN_COMMON_SHARE = 0.6
MIN_FRAGMENT_CHARS = 6  # ellipsis fragments shorter than this prove nothing on their own

_ESCAPES_RE = re.compile(r"\\[nrt]")
_QUOTES_RE = re.compile(r"[\\\"'`\u2018\u2019\u201c\u201d]")
_WS_RE = re.compile(r"\s+")
_ELLIPSIS_RE = re.compile(r"\.\.\.+|\u2026|\[\.\.\.\]")
STRICT_NOTE = "strict evidence: the quoted evidence was not found in the transcript; judged pass was "


def normalise(text: str) -> str:
    """The form both quote and transcript are compared in."""
    text = _ESCAPES_RE.sub(" ", text)
    text = _QUOTES_RE.sub("", text)
    return _WS_RE.sub(" ", text).strip().casefold()


def longest_common_run(quote: str, haystack: str) -> int:
    """Length of the longest substring of ``quote`` that occurs in ``haystack``.

    Grows a window over ``quote``: each step either extends the best length found so far by
    one or slides the window, so it costs ``O(len(quote))`` substring searches.
    """
    best, start = 0, 0
    while start + best < len(quote):
        if quote[start : start + best + 1] in haystack:
            best += 1
        else:
            start += 1
    return best


def evidence_found(evidence: str, transcript: str, *, normalised_transcript: str | None = None) -> bool:
    """True when ``evidence`` is found in ``transcript`` under the rules in the module docstring.

    Pass ``normalised_transcript`` (``normalise(transcript)``) to reuse it across verdicts.
    """
    hay = normalised_transcript if normalised_transcript is not None else normalise(transcript)
    quote = normalise(evidence)
    if not quote:
        return False
    if quote in hay:
        return True
    fragments = [f.strip() for f in _ELLIPSIS_RE.split(quote) if f.strip()]
    if len(fragments) > 1 and all(len(f) >= MIN_FRAGMENT_CHARS and f in hay for f in fragments):
        return True
    run = longest_common_run(quote, hay)
    return run >= MIN_COMMON_CHARS and run >= MIN_COMMON_SHARE * len(quote)


def check_evidence(
    verdicts: Sequence[AssertionVerdict], transcript: str, *, strict: bool = False
) -> list[AssertionVerdict]:
    """Return ``verdicts`` with ``evidence_verified`` set on every pass (fails stay None).

    In ``strict`` mode a pass whose evidence is not found becomes a fail; its evidence reads
    ``absent: ...`` and ``note`` keeps the judge's original quote.
    """
    hay = normalise(transcript)
    checked = []
    for verdict in verdicts:
        if not verdict.passed:
            checked.append(verdict)
            continue
        found = evidence_found(verdict.evidence, transcript, normalised_transcript=hay)
        if found or not strict:
            checked.append(verdict.model_copy(update={"evidence_verified": found}))
            continue
        checked.append(
            verdict.model_copy(
                update={
                    "passed": False,
                    "evidence_verified": False,
                    "evidence": "absent: evidence the transcript shows (the judge's quote is not in it)",
                    "note": STRICT_NOTE + repr(verdict.evidence[:500]),
                }
            )
        )
    return checked


def verified_share(verdicts: Sequence[AssertionVerdict]) -> float | None:
    """Share of checked passes whose evidence was found; None when no pass was checked."""
    checked = [v.evidence_verified for v in verdicts if v.evidence_verified is not None]
    return sum(checked) / len(checked) if checked else None
