"""The sandbox every executor tool call runs in (interface; implementation: issue 3).

``open_sandbox(workspace, mode, limits)`` returns a :class:`Sandbox` whose ``run`` executes
one shell command confined to the workspace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from schemas.status import SandboxMode


@dataclass(frozen=True)
class SandboxLimits:
    """Per-command limits; hitting one ends that command with ``CommandResult.limit`` set."""

    timeout_s: float = 60.0
    cpu_s: int = 60
    memory_mb: int = 2048
    processes: int = 256
    file_size_mb: int = 256
    output_chars: int = 30_000


@dataclass(frozen=True)
class CommandResult:
    """What one sandboxed command returned."""

    output: str
    """Combined stdout and stderr; head and tail kept with an elision marker when large."""
    exit_code: int | None
    """Exit code; None when the command was killed by a limit before exiting."""
    limit: str | None = None
    """Limit hit: ``timeout``, ``cpu``, ``memory``, ``processes`` or ``file-size``; None otherwise."""
    truncated: bool = False
    """True when the middle of the output was elided."""
    duration_s: float = 0.0
    """Wall-clock duration."""


class Sandbox(Protocol):
    """Runs shell commands with the workspace as the only writable host path."""

    mode: SandboxMode
    workspace: Path
    """Host path of the workspace (inside the sandbox it is mounted at a fixed path)."""
    inner_root: str
    """Path of the workspace as commands inside the sandbox see it (e.g. ``/workspace``)."""

    def run(self, command: str, *, timeout_s: float | None = None, stdin: str | None = None) -> CommandResult:
        """Run ``command`` with ``bash -c`` in the workspace; never raises for the command's own failure."""
        ...
