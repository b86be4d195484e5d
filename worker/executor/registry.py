"""The executors a worker runs, found by the run's ``--executor`` value: one call shape for all.

- ``agent``: the built-in tool loop (a trigger run's loop when the run measures triggers);
- ``cmd:<command line>``: an agent CLI writing the stream-json event format (``external.py``);
- every harness of ``harnesses/registry.py``: the real agent CLI behind the model proxy
  (``harness_task.py``), one executor for them all, its adapter saying what is particular.

Each gets a :class:`~worker.executor.shard_job.ShardJob` (the shard, its case, its materialized
workspace, the skill text) and returns the shard's trajectory, raising the contract's named
errors. A new harness needs nothing here: its adapter's registration is enough.
"""

from __future__ import annotations

from dataclasses import dataclass

from harnesses.base import Harness
from harnesses.registry import BUILTIN, CMD_PREFIX, check_executor, harness_for
from schemas.trajectory import Trajectory
from worker.executor.shard_job import Executor, ShardJob
from worker.sandbox import open_sandbox

__all__ = ["BuiltinAgent", "Command", "Executor", "HarnessExecutor", "ShardJob", "executor_for"]


class BuiltinAgent:
    """``agent``: the built-in tool loop over the product's model client."""

    def run(self, job: ShardJob) -> Trajectory:
        from worker.executor.agent import run_agent
        from worker.executor.trigger import run_trigger_agent

        manifest, settings = job.manifest, job.manifest.settings
        model = manifest.shard(job.shard_id).model
        client = job.ctx.model_client(manifest.plan.run_id)
        sandbox = open_sandbox(job.workspace, manifest.plan.sandbox, job.limits)
        if settings.triggers is not None:
            budget = settings.budget.model_copy(update={"max_turns": settings.triggers.turns})
            return run_trigger_agent(client, model, job.inputs(), sandbox=sandbox, root=job.workspace, budget=budget)
        return run_agent(client, model, job.inputs(), sandbox=sandbox, budget=settings.budget)


@dataclass(frozen=True)
class Command:
    """``cmd:<command line>``: an agent CLI in the sandbox, its stream-json parsed."""

    option: str

    def run(self, job: ShardJob) -> Trajectory:
        from worker.executor.external import ExternalExecutor, external_limits, run_external

        manifest, budget = job.manifest, job.manifest.settings.budget
        limits = external_limits(job.limits, wall_clock_s=budget.wall_clock_s)
        return run_external(
            ExternalExecutor.from_option(self.option),
            job.inputs(),
            sandbox=open_sandbox(job.workspace, manifest.plan.sandbox, limits),
            wall_clock_s=budget.wall_clock_s,
        )


@dataclass(frozen=True)
class HarnessExecutor:
    """A real agent harness, run natively behind the shard's model proxy."""

    harness: Harness

    def run(self, job: ShardJob) -> Trajectory:
        from worker.executor.harness_task import run_harness_shard

        return run_harness_shard(job, self.harness)


def executor_for(value: str) -> Executor:
    """The executor a run's ``--executor`` value names; ConfigError for an unknown one."""
    check_executor(value)
    if value == BUILTIN:
        return BuiltinAgent()
    if value.startswith(CMD_PREFIX):
        return Command(value)
    harness = harness_for(value)
    assert harness is not None, value  # check_executor knows no other kind
    return HarnessExecutor(harness)
