"""What a worker found when it checked, before a run's shards are sent, that the run's models answer
and that its host can run the run's cases (the sandbox, an external or harness executor's canary)."""

from __future__ import annotations

from typing import Literal

from schemas.base import FrozenModel
from schemas.constants import (
    BUILTIN_EXECUTOR,
    CMD_EXECUTOR_PREFIX,
    QUEUE_EXECUTE,
    QUEUE_GRADE,
    RECORDED_EXECUTOR_PREFIX,
)
from schemas.errors import BlockedError, blocked_error
from schemas.manifest import RunManifest
from schemas.status import SandboxMode


class ModelCheck(FrozenModel):
    """One model as one worker sees it: its key present, its endpoint answering one minimal call."""

    model: str
    """The litellm model name checked."""
    ok: bool
    """True when the key is present and the minimal call answered."""
    why: str = ""
    """When not ok: what is missing or what the endpoint answered (never a key)."""


class PreflightReport(FrozenModel):
    """A worker's answer to a preflight request, kept in Redis for the waiting producer."""

    version: Literal[1] = 1
    """Record version."""
    queue: str
    """The queue whose worker answered (execute checks executor models, grade checks judges)."""
    worker: str
    """Host name and pid of the answering worker."""
    checks: list[ModelCheck]
    """One entry per model the queue's shards will call."""
    error: str = ""
    """When the check itself could not run on this worker (the manifest unreadable, say): why."""

    def failures(self) -> list[str]:
        """One line per reason the run must not start, naming the model (or the queue) at fault."""
        lines = [f"{c.model}: {c.why}" for c in self.checks if not c.ok]
        if self.error:
            lines.append(f"preflight on queue {self.queue} ({self.worker}): {self.error}")
        return lines


_NO_MODEL_OF_OURS = (CMD_EXECUTOR_PREFIX, RECORDED_EXECUTOR_PREFIX)


def models_for(manifest: RunManifest, queue: str) -> list[str]:
    """The models a queue's shards of this run will call through the product's own model client."""
    if queue == QUEUE_GRADE:
        return list(manifest.plan.judges)
    # Every executor but an external command's and recordings calls its model through the product
    # (the built-in agent through its client, a harness through its proxy).
    if queue == QUEUE_EXECUTE:
        ours = {m for e, ms in manifest.executors().items() if not e.startswith(_NO_MODEL_OF_OURS) for m in ms}
        return [m for m in manifest.plan.models if m in ours]
    return []  # an external command or recordings: no model calls of ours on this queue


def preflight_queues(manifest: RunManifest) -> list[str]:
    """The queues whose workers must check models before this run's shards are sent."""
    return [q for q in (QUEUE_EXECUTE, QUEUE_GRADE) if models_for(manifest, q)]


HOST_CHECK = "host"
"""The name a host check's report is kept under, beside the queues' preflight reports."""


class HostCheckReport(FrozenModel):
    """An execute worker's answer to a host check: the run's cases can run on this host, or the named
    error that says why not (``BLOCKED_NO_SANDBOX``, ``BLOCKED_NO_HARNESS``, ``BLOCKED_NO_TRANSCRIPT_CAPTURE``)."""

    version: Literal[1] = 1
    """Record version."""
    worker: str
    """Host name and pid of the answering worker."""
    status: str = ""
    """The status of the named error the check raised; empty when the host passed."""
    detail: str = ""
    """That error's detail, or why the check itself could not run (with an empty ``status``)."""

    def error(self) -> BlockedError | None:
        """The error that stops the run, or None when the host passed."""
        if self.status:
            return blocked_error(self.status, self.detail)
        if self.detail:
            return BlockedError(f"the host check on {self.worker} could not run: {self.detail}")
        return None


def needs_canary(manifest: RunManifest) -> bool:
    """Whether the run's executor is an external agent CLI or a harness, whose transcript capture a
    canary proves once on an execute worker before the batch (the built-in agent and recordings need none)."""
    outside = [e for e in manifest.executors() if e != BUILTIN_EXECUTOR and not e.startswith(RECORDED_EXECUTOR_PREFIX)]
    return bool(manifest.plan.shards) and bool(outside)


def needs_host_check(manifest: RunManifest, *, embedded: bool) -> bool:
    """Whether an execute worker checks its host before the run's shards are sent: for a canary, and on
    an embedded cluster for the bubblewrap sandbox too (this host executes; a cluster's workers checked
    theirs when they started)."""
    executes = bool(manifest.plan.shards) and not manifest.settings.executor.startswith(RECORDED_EXECUTOR_PREFIX)
    sandboxed = embedded and manifest.plan.sandbox is SandboxMode.BWRAP
    return needs_canary(manifest) or (executes and sandboxed)
