"""The CLI's consoles: whatever they print reaches the terminal with no control character of its own.

Rich never interprets markup here (every call passes ``markup=False`` or a ``Text``) and drops
a few controls (BEL), but it passes ESC through: a file, corpus key or model name holding
``\\x1b[2J`` would clear the screen, ``\\x1b]0;…`` retitle the window. This console escapes,
in every segment of text it renders (a string, a ``Text``, a table cell), each control
character but the line feeds and tabs between lines (:func:`schemas.visible.visible_lines`).
Rich's own control segments (cursor moves of a live display) and styles are left as they are.

A name embedded in a line is escaped where the line is made (:func:`schemas.visible.visible`,
line breaks included), since this console cannot tell a forged line break from a real one.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from schemas.visible import visible_lines


class InertConsole(Console):
    """A Rich console whose rendered text carries no terminal control sequence."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or not segment.text:
                yield segment
            else:
                yield Segment(visible_lines(segment.text), segment.style, segment.control)
