"""The values both halves of the sandbox share: per-command limits, a command's result, the inner paths.

A leaf (imports nothing of the sandbox), so :mod:`worker.sandbox` (the interface) and
:mod:`worker.sandbox_exec` (the launch mechanics) can both import it without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.event_bounds import TOOL_RESULT_CAP_CHARS

INNER_ROOT = "/workspace"
"""Where the workspace is mounted inside the sandbox."""
INNER_HOME = "/home/agent"
"""HOME inside the sandbox (a private tmpfs)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Per-command limits; hitting one ends that command with ``CommandResult.limit`` set."""

    timeout_s: float = 60.0
    cpu_s: int = 60
    memory_mb: int = 2048
    processes: int = 256
    file_size_mb: int = 256
    output_chars: int = TOOL_RESULT_CAP_CHARS
    tmpfs_mb: int = 512
    """Size cap of each private tmpfs (HOME and /tmp) in bubblewrap mode."""
    workspace_mb: int = 2048
    """Quota on the workspace's disk use, watched while every command runs and measured after it
    (:mod:`worker.workspace_quota`)."""
    workspace_files: int = 200_000
    """Quota on the number of entries (files, folders, links) in the workspace."""


@dataclass(frozen=True)
class CommandResult:
    """What one sandboxed command returned."""

    output: str
    """Combined stdout and stderr; head and tail kept with an elision marker when large."""
    exit_code: int | None
    """Exit code; None when the command was killed by a limit before exiting."""
    limit: str | None = None
    """Limit hit: ``timeout``, ``cpu``, ``memory``, ``processes``, ``file-size`` or ``workspace-quota``
    (the workspace's quota, watched while the command ran); None otherwise."""
    truncated: bool = False
    """True when the middle of the output was elided."""
    duration_s: float = 0.0
    """Wall-clock duration."""
