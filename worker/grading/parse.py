"""Reading the judge's answer: extract the JSON array, type-check it, pair it by position. Pure.

The rules: tolerate a markdown code fence or prose around the array, but only
one: an answer offering several candidate arrays (a quoted, injected verdict array beside
the judge's own) is malformed (``ambiguous``) and gets the one re-ask; pair
objects with assertions *by position*; cross-check each echoed ``text`` leniently
(whitespace collapsed, quote escaping ignored, or a leading-prefix match) and call only a
gross mismatch (the text clearly belongs to a *different* assertion) a reorder. Anything
else wrong is :class:`Malformed` with a reason; the caller re-asks once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from schemas.words import plural

# An echo shorter than this cannot count as a leading-prefix match (an empty "text" would
# otherwise be a prefix of every assertion).
MIN_PREFIX_CHARS = 12
# A drifted echo is called a reorder only when it is this much closer (token Jaccard) to another
# assertion than to its own, and close to that other one in absolute terms.
REORDER_MARGIN = 0.25
REORDER_MIN_SIMILARITY = 0.6
_MAX_ARRAY_STARTS = 200  # bound the scan for "[" in a long prose answer

_FENCE_RE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.DOTALL)
_QUOTES_RE = re.compile(r"[\\\"'`\u2018\u2019\u201c\u201d\u00ab\u00bb]")
_WS_RE = re.compile(r"\s+")
_ELLIPSIS_RE = re.compile(r"(?:\.\.\.|\u2026)\s*\Z")
_WORD_RE = re.compile(r"\w+")


class MalformedKind(str, Enum):
    """Why an answer cannot be used."""

    NOT_JSON = "not-json"
    AMBIGUOUS = "ambiguous"
    WRONG_TYPE = "wrong-type"
    WRONG_LENGTH = "wrong-length"
    REORDER = "reorder"


@dataclass(frozen=True)
class JudgedVerdict:
    """One verdict as the judge gave it, paired with its assertion (``text`` is the corpus text)."""

    text: str
    passed: bool
    evidence: str
    echoed_text: str


@dataclass(frozen=True)
class Parsed:
    """A usable answer: one verdict per assertion, in assertion order."""

    verdicts: tuple[JudgedVerdict, ...]


@dataclass(frozen=True)
class Malformed:
    """An unusable answer and why."""

    kind: MalformedKind
    reason: str


def _prose_arrays(text: str) -> list[list[Any]]:
    """Every top-level ``[ ... ]`` in ``text`` that decodes as JSON, left to right, none nested in another."""
    decoder = json.JSONDecoder()
    found: list[list[Any]] = []
    start = text.find("[")
    for _ in range(_MAX_ARRAY_STARTS):
        if start < 0:
            break
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            value, end = None, start + 1
        if isinstance(value, list):
            found.append(value)
        start = text.find("[", end if isinstance(value, list) else start + 1)
    return found


def _verdict_like(value: list[Any]) -> bool:
    return bool(value) and all(isinstance(item, dict) for item in value)


def candidate_arrays(answer: str) -> list[list[Any]]:
    """The verdict arrays an answer offers: the whole text when it is one, else every fenced
    block holding one plus every array of objects in the prose outside the fences."""
    text = answer.strip()
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, list):
        return [whole]
    fenced: list[list[Any]] = []
    for match in _FENCE_RE.finditer(text):
        try:
            value = json.loads(match.group(1).strip())
        except ValueError:
            continue
        if isinstance(value, list):
            fenced.append(value)
    prose = _FENCE_RE.sub(" ", text)
    return fenced + [v for v in _prose_arrays(prose) if _verdict_like(v)]


def extract_array(answer: str) -> list[Any] | None:
    """The one JSON array in ``answer``: the whole text, else the only fenced block holding an
    array, else the only array of objects in the prose (or, with none, the first array of any
    kind, so a wrong shape is reported as such). None when there is no array or when the
    answer offers more than one candidate (see :func:`candidate_arrays`): an answer quoting
    an injected verdict array next to its own is ambiguous, never read as either."""
    candidates = candidate_arrays(answer)
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        return None
    anything = _prose_arrays(_FENCE_RE.sub(" ", answer.strip()))
    return anything[0] if anything else None


def normalise_text(text: str) -> str:
    """Casefolded, quotes and backslashes dropped, whitespace collapsed, trailing ellipsis cut."""
    text = _QUOTES_RE.sub("", text)
    text = _WS_RE.sub(" ", text).strip()
    return _ELLIPSIS_RE.sub("", text).strip().casefold()


def texts_match(echoed: str, assertion: str) -> bool:
    """The lenient cross-check: equal after :func:`normalise_text`, or one is a leading prefix
    of the other and at least ``MIN_PREFIX_CHARS`` long."""
    a, b = normalise_text(echoed), normalise_text(assertion)
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= MIN_PREFIX_CHARS and long_.startswith(short)


def _similarity(a: str, b: str) -> float:
    wa, wb = set(_WORD_RE.findall(normalise_text(a))), set(_WORD_RE.findall(normalise_text(b)))
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def reordered_to(echoed: str, index: int, assertions: Sequence[str]) -> int | None:
    """The index of a *different* assertion that ``echoed`` clearly corresponds to, or None.

    Echo drift (a paraphrase, a truncation) is tolerated; only an echo that matches another
    assertion leniently while not matching its own, or is far closer to another one, counts.
    """
    if texts_match(echoed, assertions[index]):
        return None
    own = _similarity(echoed, assertions[index])
    best, best_sim = None, 0.0
    for j, other in enumerate(assertions):
        if j == index or normalise_text(other) == normalise_text(assertions[index]):
            continue
        if texts_match(echoed, other):
            return j
        sim = _similarity(echoed, other)
        if sim > best_sim:
            best, best_sim = j, sim
    if best is not None and best_sim >= REORDER_MIN_SIMILARITY and best_sim - own >= REORDER_MARGIN:
        return best
    return None


def _typed(item: Any, i: int) -> tuple[str, bool, str] | str:
    if not isinstance(item, dict):
        return f"item {i} is {type(item).__name__}; an object is required"
    text, passed, evidence = item.get("text"), item.get("passed"), item.get("evidence")
    if not isinstance(text, str):
        return f"item {i}: 'text' is {type(text).__name__}; a string is required"
    if not isinstance(passed, bool):
        return f"item {i}: 'passed' is {type(passed).__name__}; true or false is required"
    if not isinstance(evidence, str):
        return f"item {i}: 'evidence' is {type(evidence).__name__}; a string is required"
    return text, passed, evidence


def parse_verdicts(answer: str, assertions: Sequence[str]) -> Parsed | Malformed:
    """Parse a judge answer against ``assertions`` (the texts sent, in order).

    Returns :class:`Parsed` with the corpus texts as ``text`` when the answer is a JSON array
    of ``{"text": str, "passed": bool, "evidence": str}`` of the right length whose echoes do
    not show a reorder; otherwise :class:`Malformed` naming the first problem found.
    """
    candidates = len(candidate_arrays(answer))
    if candidates > 1:
        return Malformed(
            MalformedKind.AMBIGUOUS, f"{candidates} candidate verdict arrays in the answer; exactly one is required"
        )
    items = extract_array(answer)
    if items is None:
        return Malformed(MalformedKind.NOT_JSON, "no JSON array found in the answer")
    if len(items) != len(assertions):
        return Malformed(
            MalformedKind.WRONG_LENGTH, f"{plural(len(items), 'verdict')} for {plural(len(assertions), 'assertion')}"
        )
    verdicts = []
    for i, item in enumerate(items):
        typed = _typed(item, i)
        if isinstance(typed, str):
            return Malformed(MalformedKind.WRONG_TYPE, typed)
        echoed, passed, evidence = typed
        other = reordered_to(echoed, i, assertions)
        if other is not None:
            return Malformed(
                MalformedKind.REORDER,
                f"item {i} echoes assertion {other} ({assertions[other][:60]!r}), not assertion {i}",
            )
        verdicts.append(JudgedVerdict(assertions[i], passed, evidence, echoed))
    return Parsed(tuple(verdicts))
