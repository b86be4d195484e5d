"""What an executor is given for one shard, and the one interface every executor implements."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from schemas.corpus import EvalCase
from schemas.manifest import RunManifest
from schemas.trajectory import Trajectory
from worker.context import Context
from worker.executor.prompt import ExecutorInputs
from worker.sandbox import SandboxLimits


@dataclass(frozen=True)
class ShardJob:
    """What every executor is given for one shard."""

    ctx: Context
    manifest: RunManifest
    shard_id: str
    case: EvalCase
    workspace: Path
    """The shard's materialized workspace (removed after the executor returns)."""
    skill_text: str | None
    """The skill as the workspace holds it; None for the no-skill arm."""
    agents: dict[str, str]
    """The skill's agents/*.md, name -> text."""
    limits: SandboxLimits
    """The per-command limits of the run's budget; an executor widens them for itself."""

    def inputs(self) -> ExecutorInputs:
        """What the executor is told of this shard: its skill, as its arm shows it, and its case."""
        skill = self.manifest.shard(self.shard_id).skill
        return ExecutorInputs(skill, self.skill_text, self.agents, self.case, shard_id=self.shard_id)


class Executor(Protocol):
    """Runs one shard; raises the contract's named errors (``ExecutorFailed``, ``NoSandbox``, ...)."""

    def run(self, job: ShardJob) -> Trajectory: ...
