"""The workspace quota: what a workspace holds, and a watch that stops a command past it.

Every executor is held to the same quota (``SandboxLimits.workspace_mb``, ``workspace_files``)
with the same measurement, :func:`quota_breach`: the built-in agent after each tool call, a
harness or a ``cmd:`` executor after its one long sandboxed command. While any sandboxed
command runs, a :class:`QuotaWatch` samples the workspace and stops the command when it is
over, so an agent that runs its own tool loop inside one command cannot fill the host's
filesystem (a tmpfs is memory) for as long as its wall clock lasts.

Sampling walks the workspace (the walk stops just past the entry quota) at most once a second,
and waits four times as long as the last walk took before the next one: an agent that makes
the workspace expensive to measure gets it measured less often, never more than a fifth of a
core. Writes between two samples are caught by the measurement after the command.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from worker.sandbox_spec import SandboxLimits

WORKSPACE_LIMIT = "workspace-quota"
"""``CommandResult.limit`` of a command the watch stopped."""
SAMPLE_INTERVAL_S = 1.0
SAMPLE_DUTY = 0.2
"""Most of the watch's thread's time spent walking the workspace."""


@dataclass(frozen=True)
class WorkspaceUsage:
    """What a workspace holds: allocated bytes and entries."""

    bytes: int
    files: int

    def over(self, limits: SandboxLimits) -> str | None:
        """Which quota is exceeded, as a sentence for the trajectory, or None."""
        if self.bytes > limits.workspace_mb * 1024 * 1024:
            return f"the workspace holds {self.bytes // (1024 * 1024)} MB, over its {limits.workspace_mb} MB quota"
        if self.files > limits.workspace_files:
            return f"the workspace holds {self.files} entries, over its {limits.workspace_files} quota"
        return None


def workspace_usage(root: Path, *, stop_after_files: int | None = None) -> WorkspaceUsage:
    """Allocated bytes (``st_blocks``, so sparse files count as what they occupy) and entries under
    ``root``, never following a link; stops counting past ``stop_after_files`` entries (also
    inside one folder holding more).

    Each tool call is its own bwrap, so no per-sandbox tmpfs can hold the workspace's state
    across calls; measuring the workspace from the host works for an unprivileged worker too.
    """
    total = files = 0
    stack = [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    files += 1
                    if stop_after_files is not None and files > stop_after_files:
                        return WorkspaceUsage(bytes=total, files=files)
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue  # a folder the agent made unreadable: its content is not counted, the folder is
    return WorkspaceUsage(bytes=total, files=files)


def quota_breach(root: Path, limits: SandboxLimits, *, stopped: bool = False) -> str | None:
    """The quota ``root`` exceeds, as a sentence for the trajectory, or None; the one measurement
    of every executor. ``stopped``: a watch stopped the command (its ``limit`` is
    :data:`WORKSPACE_LIMIT`), which counts as a breach even if the workspace shrank since."""
    over = workspace_usage(root, stop_after_files=limits.workspace_files).over(limits)
    if over is None and stopped:
        return "the workspace went over its quota while the command ran"
    return over


class QuotaWatch:
    """A thread sampling ``roots`` while a command runs; ``tripped`` is set once they hold more
    than the quota together (a harness's private HOME, a host folder, counts with its workspace).

    Use as a context manager around the command; :func:`worker.sandbox_exec.execute` kills the
    command's process group when ``tripped`` is set.
    """

    def __init__(
        self, roots: tuple[Path, ...], limits: SandboxLimits, *, interval_s: float = SAMPLE_INTERVAL_S
    ) -> None:
        self.roots, self.limits, self.interval_s = roots, limits, interval_s
        self.tripped = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="workspace-quota", daemon=True)

    def __enter__(self) -> QuotaWatch:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        wait_s = self.interval_s
        while not self._done.wait(wait_s):
            started = time.monotonic()
            usage = WorkspaceUsage(0, 0)
            for root in self.roots:
                more = workspace_usage(root, stop_after_files=self.limits.workspace_files - usage.files)
                usage = WorkspaceUsage(usage.bytes + more.bytes, usage.files + more.files)
            if usage.over(self.limits) is not None:
                self.tripped.set()
                return
            took = time.monotonic() - started
            wait_s = max(self.interval_s, took * (1 - SAMPLE_DUTY) / SAMPLE_DUTY)
