"""The CLI's consoles: whatever they print reaches the terminal with no control character of its own.

Rich never interprets markup here (every call passes ``markup=False`` or a ``Text``) and drops
a few controls (BEL, CR), but it passes ESC through: a file, corpus key or model name holding
``\\x1b[2J`` would clear the screen, ``\\x1b]0;…`` retitle the window. This console shows each
control character but the line feeds and tabs between lines as a visible escape
(:func:`schemas.visible.visible_lines`) in whatever it renders: a string and a ``Text`` before
they are laid out, and every rendered segment of text after, whatever renderable made it (a
table sizes its cells from their raw text first, so an escape there may be cut short, never
passed raw). Rich's own control segments (the cursor moves of a live display) and its styles
are left as they are.

A name embedded in a line is escaped where the line is made (:func:`schemas.visible.visible`,
line breaks included), since this console cannot tell a forged line break from a real one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Span, Text

from schemas.visible import BLOCK_CONTROL_RE, visible_lines


def inert_text(text: Text) -> Text:
    """``text`` with its control characters (line feeds and tabs kept) as escapes, in their own styles."""
    if not BLOCK_CONTROL_RE.search(text.plain):
        return text
    out = text.blank_copy()
    start = 0
    for match in BLOCK_CONTROL_RE.finditer(text.plain):
        out.append_text(text[start : match.start()])
        char = text[match.start() : match.end()]  # its spans say how the character was styled
        shown = visible_lines(match.group())
        out.append_text(Text(shown, style=char.style, spans=[Span(0, len(shown), s.style) for s in char.spans]))
        start = match.end()
    out.append_text(text[start:])
    return out


class InertConsole(Console):
    """A Rich console whose rendered text carries no terminal control sequence."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(visible_lines(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        if isinstance(renderable, Text):
            renderable = inert_text(renderable)
        for segment in super().render(renderable, options):
            if segment.control or not segment.text:
                yield segment
            else:
                yield Segment(visible_lines(segment.text), segment.style, segment.control)
