"""The executor names a run accepts, and the harness adapter behind each harness name.

``agent`` is the built-in tool loop; ``cmd:<command line>`` any CLI speaking Claude Code's
stream-json; the names in :data:`HARNESSES` are real agent harnesses run natively. Any other
value is a :class:`ConfigError` that lists the known ones (a typo never silently runs the
built-in agent).
"""

from __future__ import annotations

from collections.abc import Callable

from harnesses.base import Harness
from harnesses.claude_code import ClaudeCode
from harnesses.codex import Codex
from harnesses.gemini_cli import GeminiCli
from harnesses.opencode import OpenCode
from schemas.errors import ConfigError

BUILTIN = "agent"
CMD_PREFIX = "cmd:"
HARNESSES: dict[str, Callable[[], Harness]] = {
    "claude-code": ClaudeCode,
    "codex": Codex,
    "opencode": OpenCode,
    "gemini-cli": GeminiCli,
}
KNOWN = (BUILTIN, *HARNESSES, f"{CMD_PREFIX}'<command line>'")


def check_executor(value: str) -> str:
    """Return ``value`` when it names an executor; raise ConfigError listing the known ones."""
    if value == BUILTIN or value in HARNESSES:
        return value
    if value.startswith(CMD_PREFIX) and value[len(CMD_PREFIX) :].strip():
        return value
    raise ConfigError(f"--executor: unknown executor {value!r}; known: {', '.join(KNOWN)}")


def harness_for(value: str) -> Harness | None:
    """The adapter of a harness executor name; None for ``agent`` and ``cmd:``."""
    factory = HARNESSES.get(value)
    return factory() if factory is not None else None
