"""Untrusted text as inert Markdown: shared by the report's sections (reducer/render.py) and
the parts it imports."""

from __future__ import annotations

import re

# Every kind of line break (a new line would start a heading, a list or raw HTML block) and
# the other control characters; then the characters that make HTML or Markdown structure.
MD_BREAKS = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+")
MD_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f]")
# Mid-line (every untrusted string is embedded after the report's own prefix) only these make
# structure: code spans, emphasis, links and images, table cells, strikethrough (``~~``, so a ref
# like ``HEAD~1`` reads as typed); "_" only at a
# word boundary (CommonMark ignores it inside words, as in BLOCKED_BAD_FIXTURE).
_MD_SPECIAL = re.compile(r"([\\`*\[\]|]|~(?=~)|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def md(text: object) -> str:
    """``text`` (untrusted: from the repo, the corpus, the agent or a judge) as inert Markdown.

    One line; ``&``, ``<`` and ``>`` as HTML entities, so no raw HTML, tag or comment; every
    character that makes structure mid-line backslash-escaped, so no link, image, emphasis,
    code span or table cell boundary. Renders as the same visible text.
    """
    flat = MD_CONTROL.sub("\ufffd", MD_BREAKS.sub(" ", str(text)))
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", flat)
