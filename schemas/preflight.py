"""What a worker found when it checked, before a run's shards are sent, that the run's models answer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from schemas.constants import CMD_EXECUTOR_PREFIX, QUEUE_EXECUTE, QUEUE_GRADE, RECORDED_EXECUTOR_PREFIX
from schemas.manifest import RunManifest


class ModelCheck(BaseModel):
    """One model as one worker sees it: its key present, its endpoint answering one minimal call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    """The litellm model name checked."""
    ok: bool
    """True when the key is present and the minimal call answered."""
    why: str = ""
    """When not ok: what is missing or what the endpoint answered (never a key)."""


class PreflightReport(BaseModel):
    """A worker's answer to a preflight request, kept in Redis for the waiting producer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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
    if queue == QUEUE_EXECUTE and not manifest.settings.executor.startswith(_NO_MODEL_OF_OURS):
        return list(manifest.plan.models)
    return []  # an external command or recordings: no model calls of ours on this queue


def preflight_queues(manifest: RunManifest) -> list[str]:
    """The queues whose workers must check models before this run's shards are sent."""
    return [q for q in (QUEUE_EXECUTE, QUEUE_GRADE) if models_for(manifest, q)]
