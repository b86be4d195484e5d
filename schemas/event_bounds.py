"""How much of what an agent sends a trajectory keeps: tool results and tool-call arguments, bounded.

Every executor caps a tool result at :data:`TOOL_RESULT_CAP_CHARS` (head and tail kept, the
middle counted); recordings imported for grading are cut the same way, so no trajectory, report
or page grows with what an agent (or a recording) chose to print.

A tool call's arguments are the agent's own JSON. Nested deeper than :data:`MAX_ARGUMENT_DEPTH`
levels they could not be written out (pydantic refuses some 250 levels) or read back (some
200), so the shard would end as the product's failure; larger than
:data:`MAX_ARGUMENT_CHARS` they would fill the store. Such a call is the agent's malformed call:
the offending values are replaced by a marker saying what was elided and why, every other
argument (the command) is kept, and the built-in agent's tool answers it with an error instead
of running it. Pure.
"""

from __future__ import annotations

from typing import Any, Final

from schemas.words import plural

TOOL_RESULT_CAP_CHARS: Final = 30_000
"""The characters of one tool result any executor keeps (the sandbox's output cap)."""
ELISION_MARKER: Final = "\n... [{n} chars elided] ...\n"
"""What stands in for a result's cut middle, saying how much was cut."""

MAX_ARGUMENT_DEPTH: Final = 32
"""Levels a tool call's arguments may nest (the arguments object is level 1): as deep as a corpus
may, far beyond any real tool's input, far below what the trajectory's JSON can be read back at."""
MAX_ARGUMENT_CHARS: Final = 1_000_000
"""About the characters of JSON one call's arguments may hold: far more than a model's reply holds
and than the judge reads (``TRANSCRIPT_CAP_CHARS``), so a command cut here still exceeds the
judge's cap and is graded as the agent's behaviour."""
_ROOM: Final = MAX_ARGUMENT_CHARS - 4_096  # what bounding keeps: markers fit below the bound, so it is idempotent
_MAX_KEY_CHARS: Final = 1_000
ELIDED_KEY: Final = "_elided_by_skill_eval"
"""The argument that counts the arguments left out whole (keys too long, or past the bound)."""


def capped_text(text: str, cap: int = TOOL_RESULT_CAP_CHARS) -> tuple[str, bool]:
    """``text`` unchanged when it fits in ``cap``; else its head and tail around a marker saying how
    many characters were cut. Returns ``(text, cut)``."""
    if len(text) <= cap:
        return text, False
    head = max(cap // 2, 0)
    tail = max(cap - head, 0)
    kept = text[:head] + ELISION_MARKER.format(n=len(text) - head - tail) + (text[len(text) - tail :] if tail else "")
    return kept, True


def _scalar_chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() // 3 + 2
    return len(str(value))


def measure(value: Any, depth: int = 1) -> tuple[bool, int]:
    """(whether ``value`` at nesting level ``depth`` goes deeper than :data:`MAX_ARGUMENT_DEPTH`,
    about how many characters of JSON it is). Walks without recursion and stops early once it knows
    either is over."""
    size, stack = 0, [(value, depth)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list | tuple):
            if level > MAX_ARGUMENT_DEPTH:
                return True, size
            size += 2 + len(item)
            if isinstance(item, dict):
                size += sum(len(str(k)) + 3 for k in item)
                stack += [(v, level + 1) for v in item.values()]
            else:
                stack += [(v, level + 1) for v in item]
        else:
            size += _scalar_chars(item)
        if size > MAX_ARGUMENT_CHARS:
            return False, size
    return False, size


def bound_arguments(arguments: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``arguments`` as a trajectory keeps them, and why they were cut (None: kept as they are).

    An argument nested too deep is replaced by a marker saying so; one that does not fit the
    character bound is cut (a string: head and tail, the cut counted) or replaced by a marker;
    arguments past the bound, or with keys over 1,000 characters, are left out and counted."""
    deep, size = measure(arguments)
    if not deep and size <= MAX_ARGUMENT_CHARS:
        return arguments, None
    kept: dict[str, Any] = {}
    used, left_out, why = 2, 0, set()
    for key, value in arguments.items():
        name = str(key)
        if len(name) > _MAX_KEY_CHARS or used + len(name) >= _ROOM:
            left_out += 1
            why.add(f"over {MAX_ARGUMENT_CHARS} characters")
            continue
        used += len(name) + 3
        too_deep, chars = measure(value, 2)
        if too_deep:
            value = f"[elided by skill-eval: nests deeper than {MAX_ARGUMENT_DEPTH} levels]"
            why.add(f"nested deeper than {MAX_ARGUMENT_DEPTH} levels")
        elif used + chars > _ROOM:
            room = max(_ROOM - used - 100, 0)
            value = (
                capped_text(value, room)[0]
                if isinstance(value, str)
                else f"[elided by skill-eval: about {chars} characters, over the {MAX_ARGUMENT_CHARS} bound]"
            )
            why.add(f"over {MAX_ARGUMENT_CHARS} characters")
        kept[name] = value
        used += measure(value, 2)[1]
    if left_out:
        more = plural(left_out, "more argument")
        kept[ELIDED_KEY] = f"{more} left out by skill-eval (over the {MAX_ARGUMENT_CHARS} bound)"
    return kept, "its arguments are " + " and ".join(sorted(why)) + " (elided in the record)"
