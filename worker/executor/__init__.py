"""The executor: runs one eval case in a sandboxed workspace and records its trajectory.

Every executor implements :class:`~worker.executor.shard_job.Executor` (``run(ShardJob) ->
Trajectory``) and is found by the run's ``--executor`` value in ``registry.py``:

- :func:`run_agent` - the built-in tool-calling loop over a model client (``agent.py``,
  tools in ``tools.py``; the trigger loop in ``trigger.py``);
- :func:`run_external` - an agent CLI run in the same sandbox, its stream-json events
  parsed (``external.py``, ``harnesses/stream_json.py``), proven by :func:`run_canary` before a
  batch (``canary.py``);
- :func:`run_harness` - a real agent harness run natively, its model behind the per-shard
  proxy (``harness.py``, one runner for every adapter of ``harnesses/``; decisions in
  docs/design/harnesses.md).

The built-in loop and an external CLI are told of the shard by one :class:`ExecutorInputs`
(the skill, as its arm shows it, and the case), which ``ShardJob.inputs()`` builds.
"""

from __future__ import annotations

from harnesses.stream_json import parse_stream_json, read_stream_json
from schemas.manifest import AgentBudget
from worker.executor.agent import run_agent
from worker.executor.canary import Canary, probe_transcript_capture, run_canary
from worker.executor.external import ExternalExecutor, external_limits, run_external
from worker.executor.harness import HarnessShard, harness_limits, run_harness
from worker.executor.prompt import ExecutorInputs, RenderedPrompt, render_executor_prompt

__all__ = [
    "AgentBudget",
    "Canary",
    "ExecutorInputs",
    "ExternalExecutor",
    "HarnessShard",
    "RenderedPrompt",
    "external_limits",
    "harness_limits",
    "parse_stream_json",
    "probe_transcript_capture",
    "read_stream_json",
    "render_executor_prompt",
    "run_agent",
    "run_canary",
    "run_external",
    "run_harness",
]
