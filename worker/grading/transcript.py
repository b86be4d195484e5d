"""Preparing a transcript for the judge and building the fenced grader prompt. Pure.

Trajectories reach the judge through :mod:`worker.grading.view`, which renders, makes safe
and caps per event; this module keeps the text-level steps for a transcript that arrives as
text, the fence neutraliser both use, and the prompt builder. The rules as code, in their order:

1. split at lines starting with ``[assistant]``, ``[tool_call]`` or ``[tool_result]``;
   when there is more than one block, cap each at ``BLOCK_CAP_CHARS`` keeping the head
   and tail halves with a note of how many characters were elided;
2. cap the whole at ``TRANSCRIPT_CAP_CHARS`` the same way;
3. neutralise every closing-fence lookalike (case-insensitive, whitespace-tolerant, and
   an unclosed one at the very end).

Two deliberate differences in step 3, both stricter than the contract (reasons in
docs/design/grader.md): only the tag's opening ``</transcript`` is rewritten, to
``<\\/transcript``, because the contract's pattern also deletes everything up to the next
``>`` and so lets an agent erase its own later tool calls; and *unicode* lookalikes
(confusable ``<`` and ``/``, full-width or Cyrillic/Greek letters, zero-width characters
between the letters) are neutralised too.
"""

from __future__ import annotations

import functools
import json
import os
import re
import unicodedata
from collections.abc import Sequence

from prompts import load_template
from schemas.constants import BLOCK_CAP_CHARS, NONCE_BYTES, TRANSCRIPT_CAP_CHARS

# The contract's patterns, verbatim (CLOSING_FENCE_RE is what "a closing-fence lookalike" means).
_BLOCK_SPLIT_RE = re.compile(r"(?m)^(?=\[(?:assistant|tool_call|tool_result|http_call)\])")
CLOSING_FENCE_RE = re.compile(r"(?is)<\s*/\s*transcript[^>]*(?:>|$)")
NEUTRALISED_PREFIX = "<\\/transcript"

# Confusables a model may read as the closing tag although they are not ASCII.
_LT = "<\uff1c\ufe64\u2039\u2329\u3008\u27e8\u276e"
_SLASH = "/\uff0f\u2044\u2215\u29f8\u2571"
# Whitespace plus invisible format characters (zero-width space/joiners, marks, BOM, soft hyphen).
_GAP = r"[\s\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]*"
# Cyrillic and Greek letters that render like the Latin ones of "transcript".
_HOMOGLYPHS = {
    "t": "\u0442\u03c4\u1d1b",
    "a": "\u0430\u03b1\u1d00",
    "s": "\u0455\ua731",
    "c": "\u0441\u03f2\u1d04",
    "i": "\u0456\u03b9\u026a",
    "p": "\u0440\u03c1\u1d18",
    "r": "\u0433\u0280",
    "n": "\u043f\u0274",
}


def _letter(c: str) -> str:
    full_lower, full_upper = chr(ord(c) - 0x61 + 0xFF41), chr(ord(c) - 0x61 + 0xFF21)
    return f"[{c}{full_lower}{full_upper}{_HOMOGLYPHS.get(c, '')}]"


# The opening of a closing tag, ASCII (the contract's prefix) or confusable. Only this prefix
# is rewritten: the contract's pattern also swallows everything up to the next ">", which an
# agent could use to erase its own later tool calls from the judge's view (a stray
# "</transcript" with no ">" after it would delete the rest of the run). See the design note.
FENCE_PREFIX_RE = re.compile(f"(?i)[{_LT}]{_GAP}[{_SLASH}]{_GAP}" + _GAP.join(_letter(c) for c in "transcript"))

GRADER_TEMPLATE = "grader"
_ELIDED_NOTE = "\n... [{} chars elided from this block] ...\n"
_PLACEHOLDER_RE = re.compile(r"\{(NONCE|TRANSCRIPT|SKILL|ASSERTIONS)\}")


def cap_block(block: str, max_chars: int = BLOCK_CAP_CHARS) -> str:
    """``block`` unchanged when it fits; else its first and last ``max_chars // 2``
    characters around a note saying how many characters were elided."""
    if len(block) <= max_chars:
        return block
    half = max_chars // 2
    return block[:half] + _ELIDED_NOTE.format(len(block) - 2 * half) + block[-half:]


def cap_transcript(text: str) -> str:
    """Steps 1 and 2: per-block caps (only when more than one block is recognised), then
    the whole-transcript cap. A single unrecognised block is bounded by the whole cap only,
    so a runtime with other turn markers is not gutted to 16,000 characters."""
    parts = _BLOCK_SPLIT_RE.split(text)
    if len(parts) > 1:
        text = "".join(cap_block(p) for p in parts)
    return cap_block(text, TRANSCRIPT_CAP_CHARS)


# Characters a reader does not see, and fillers that render as blanks.
_FILLERS = frozenset("\u034f\u115f\u1160\u2800\u3164\uffa0\u17b4\u17b5")
_SKELETON_TARGET = "</transcript"


@functools.lru_cache(maxsize=65_536)
def _skeleton_char(char: str) -> str:
    """What ``char`` looks like, for look-alike detection: '' when invisible, else one folded character."""
    if char in _FILLERS or char.isspace() or unicodedata.category(char) in ("Cf", "Mn", "Me", "Cc"):
        return ""
    folded = "".join(c for c in unicodedata.normalize("NFKC", char).casefold() if unicodedata.category(c) != "Mn")
    for ascii_char, lookalikes in _HOMOGLYPHS.items():
        if folded in lookalikes:
            return ascii_char
    if folded in _LT or char in _LT:
        return "<"
    if folded in _SLASH or char in _SLASH:
        return "/"
    return folded[:1] if len(folded) == 1 else char


_MAX_LOOKALIKE_CHARS = 400  # a look-alike padded with more invisible characters than this is not read as one
_LT_CANDIDATE_RE = re.compile("[" + re.escape(_LT) + "\ufe64\uff1c\u2039\u2329\u3008\u27e8\u276e]")


def _skeleton_spans(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` whose visible skeleton reads ``</transcript`` (any confusable or invisible mix).

    Only positions holding a ``<`` look-alike are examined, each over a bounded window, so the
    cost follows the number of such characters, not the length of the text."""
    spans: list[tuple[int, int]] = []
    covered = -1
    for match in _LT_CANDIDATE_RE.finditer(text):
        start = match.start()
        if start < covered:
            continue
        got, end = 0, start
        for end in range(start, min(len(text), start + _MAX_LOOKALIKE_CHARS)):
            visible = _skeleton_char(text[end])
            if not visible:
                continue
            if visible != _SKELETON_TARGET[got]:
                break
            got += 1
            if got == len(_SKELETON_TARGET):
                spans.append((start, end + 1))
                covered = end + 1
                break
    return spans


def neutralise_fences(text: str) -> str:
    """Step 3: rewrite the opening of every closing-fence lookalike (the contract's ASCII form
    and its unicode confusables) into ``<\\/transcript``. Afterwards neither
    :data:`CLOSING_FENCE_RE` nor :data:`FENCE_PREFIX_RE` matches anywhere, and no character
    of the transcript after the lookalike is lost. A second pass reads the text as a reader
    sees it (NFKC, case folded, invisible characters and blank fillers dropped, Cyrillic and
    Greek look-alikes mapped) and rewrites any span that still reads ``</transcript``."""
    text = FENCE_PREFIX_RE.sub(lambda _m: NEUTRALISED_PREFIX, text)
    for start, end in reversed(_skeleton_spans(text)):
        text = text[:start] + NEUTRALISED_PREFIX + text[end:]
    return text


def prepare_transcript(text: str) -> str:
    """Cap and neutralise a rendered transcript (steps 1-3). The result holds no closing-fence
    lookalike; its length is at most the whole cap plus one elision note, plus one character
    per neutralised tag (``</transcript`` becomes ``<\\/transcript``)."""
    return neutralise_fences(cap_transcript(text))


def new_nonce() -> str:
    """A fresh fence nonce: ``NONCE_BYTES`` bytes from the OS random source as 16 hex characters.
    Drawn for every judge call, so a transcript can never predict the closing tag."""
    return os.urandom(NONCE_BYTES).hex()


def build_grader_prompt(
    skill: str,
    assertions: Sequence[str],
    transcript: str,
    nonce: str,
    *,
    template: str | None = None,
) -> str:
    """Fill the grader template in one pass. ``transcript`` must already be prepared.

    ``{NONCE}`` (in the opening and closing fence tags), ``{TRANSCRIPT}`` (exactly once),
    ``{SKILL}`` and ``{ASSERTIONS}`` (a JSON array) are replaced by a single regex pass, so
    braces or placeholder names inside the transcript or the assertions are never
    re-interpreted and the transcript is fenced exactly once. ``template`` defaults to
    ``prompts/grader.md``. Raises ``ValueError`` when the
    template does not have the fence shape or the nonce is not 16 lowercase hex characters.
    """
    if template is None:
        template = load_template(GRADER_TEMPLATE).text
    if template.count("{TRANSCRIPT}") != 1 or template.count("{NONCE}") != 2:
        raise ValueError("grader template needs {TRANSCRIPT} once and {NONCE} in both fence tags")
    if len(nonce) != 2 * NONCE_BYTES or not re.fullmatch(r"[0-9a-f]+", nonce):
        raise ValueError(f"nonce {nonce!r} is not {2 * NONCE_BYTES} lowercase hex characters")
    values = {
        "NONCE": nonce,
        "TRANSCRIPT": transcript,
        "SKILL": skill,
        "ASSERTIONS": json.dumps(list(assertions), ensure_ascii=False, indent=2),
    }
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], template)


def fence_tags(nonce: str) -> tuple[str, str]:
    """The opening and closing fence tags for ``nonce``."""
    return f"<transcript-{nonce}>", f"</transcript-{nonce}>"
