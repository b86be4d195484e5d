"""Untrusted text made inert for a terminal: every control character shown as a visible escape. Pure.

A file name, a corpus key, a model name from a recording or a run id typed by someone else
reaches the console inside the CLI's own lines. A raw ESC there starts a terminal escape
sequence (clear the screen, set the window title, recolour what follows) and a raw line break
starts a line that can pass for one of the CLI's own (``warning: …``). So:

* :func:`visible` is for one name or one line: C0 (line breaks and tabs too), DEL, C1 and the
  Unicode line/paragraph separators and bidirectional overrides become ``\\n``, ``\\r``,
  ``\\t``, ``\\xNN`` or ``\\uNNNN``;
* :func:`visible_lines` is for a whole block the CLI assembled itself: it keeps the line feeds
  (and tabs) between its lines and escapes every other control character;
* :func:`inert_json` is for JSON text printed for machines (``--json``): JSON escapes C0 in its
  strings but leaves DEL, C1 (``\\u009b`` is a CSI on some terminals) and the rest raw, so
  those become ``\\uNNNN`` escapes, which decode to the same value.

All three are idempotent (an escape is plain text) and never change printable text.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, the Unicode line and paragraph separators, and the bidirectional
# controls that reorder what a terminal shows.
_UNICODE = "\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069"
CONTROL_RE = re.compile(f"[\x00-\x1f{_UNICODE}]")
BLOCK_CONTROL_RE = re.compile(f"[\x00-\x08\x0b-\x1f{_UNICODE}]")  # line feed and tab kept
_JSON_RAW_RE = re.compile(f"[{_UNICODE}]")  # what a JSON encoder leaves raw when it keeps non-ASCII text
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_char(match: re.Match[str]) -> str:
    """The matched control character as its visible escape: ``\\n``, ``\\r``, ``\\t``, ``\\xNN`` or ``\\uNNNN``."""
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """``text`` as one line: every control character (line breaks included) a visible escape."""
    return CONTROL_RE.sub(escape_char, str(text))


def visible_lines(text: object) -> str:
    """``text`` with its line feeds and tabs kept and every other control character escaped."""
    return BLOCK_CONTROL_RE.sub(escape_char, str(text))


def inert_json(text: str) -> str:
    """JSON ``text`` with every control character its encoder left raw as a ``\\uNNNN`` escape.

    Such a character can only stand inside a JSON string (the rest of the syntax is ASCII),
    where its escape is the same value, so the document still parses to what it was.
    """
    return _JSON_RAW_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
