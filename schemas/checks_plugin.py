"""Assertion objects that carry Claude Code ``plugin eval`` grader semantics (extension
``deterministic-assertions``). Pure models; the checks live in worker/grading/plugin_checks.py.

A plugin eval suite's graders translate one to one into these (producer/corpus/interop_plugin.py),
and a schema-v1 corpus may use them directly:

* ``text_match``: a regular expression found (or, with ``absent``, not found) in the final
  reply, the whole trace, or one final file (plugin eval's ``regex``);
* ``tool_count``: the number of calls of a tool whose JSON input matches is within
  ``[min, max]`` (``tool_used``);
* ``tool_order``: the first call matching ``before`` comes before the first call matching
  ``after`` (``tool_order``);
* ``file_glob``: some file the run created or changed matches a glob (or, with
  ``exists: false``, none does) (``file_exists``);
* ``judged``: a judged assertion with a weight (``llm``).
"""

from __future__ import annotations

from typing import Literal

from schemas.base import FrozenModel
from schemas.checks_base import Check, CountedCheck

BUILTIN_EQUIVALENTS = {
    "Bash": "shell",
    "Read": "read_file",
    "Write": "write_file",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "Glob": "glob",
    "Grep": "grep",
}
"""Claude Code tool name -> the built-in agent's tool that does the same."""
HARNESS_EQUIVALENTS: dict[str, tuple[str, ...]] = {
    "Bash": ("exec_command", "shell_command", "local_shell"),
    "Write": ("apply_patch",),
    "Edit": ("apply_patch",),
    "MultiEdit": ("apply_patch",),
}
"""Claude Code tool name -> the tools other harnesses' models call for it (Codex's shell and patch
tools), so a plugin eval suite's tool graders read their runs alike."""


class ToolMatcher(FrozenModel):
    """Calls of one tool, optionally only those whose JSON input matches ``input_match``."""

    tool: str
    """Tool name as the harness names it (Claude Code's ``Bash`` also matches the built-in agent's ``shell``)."""
    input_match: str | None = None
    """Python regular expression searched in the call's input as compact JSON; None matches every call."""


class TextMatchCheck(Check):
    """Passes when ``pattern`` is found in the chosen text (or, with ``absent``, is not)."""

    kind: Literal["text_match"] = "text_match"
    pattern: str
    """Python regular expression (JavaScript syntax translated on import)."""
    flags: str = ""
    """Any of ``i`` (ignore case), ``m`` (multiline), ``s`` (dot matches newline)."""
    source: Literal["reply", "transcript", "file", "files", "mock_calls"] = "reply"
    """The final assistant message, the rendered trace, the final content of ``path``, the files the
    run created or changed (each its path on a line, then its final content), or the mocked MCP
    calls (one JSON line each: ``tool``, ``input``, ``output``, ``isError`` when it was one)."""
    path: str | None = None
    """Repo-relative file for ``source: file``."""
    absent: bool = False
    """True: pass only when the pattern is not found."""
    count: int | None = None
    """Pass only when the pattern matches exactly this many times (plugin eval's ``match: count:N``)."""


class ToolCountCheck(CountedCheck):
    """Passes when the number of matching calls is in ``[min, max]``."""

    kind: Literal["tool_count"] = "tool_count"
    calls: ToolMatcher
    """Which calls are counted."""


class ToolOrderCheck(Check):
    """Passes when the first call matching ``before`` precedes the first call matching ``after``
    (both must occur)."""

    kind: Literal["tool_order"] = "tool_order"
    before: ToolMatcher
    """The call whose first occurrence must come first."""
    after: ToolMatcher
    """The call whose first occurrence must come later."""


class FileGlobCheck(Check):
    """Passes when a file the run created or changed matches ``glob`` (or, with ``exists``
    false, when none does)."""

    kind: Literal["file_glob"] = "file_glob"
    glob: str
    """Repo-relative glob; ``*`` stays within a folder, ``**`` crosses folders."""
    exists: bool = True
    """False: pass only when no such file exists."""


class JudgedCheck(Check):
    """A judged assertion with a weight: the judge reads ``text`` exactly as a string assertion."""

    kind: Literal["judged"] = "judged"
    text: str
    """The assertion the judge grades."""
