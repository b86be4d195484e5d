"""How a harness shard ended: infra, or behaviour graded on what was recorded.

The rule (docs/design/failure-taxonomy.md) reads the proxy's record, never the harness's own
words, and only the requests of the harness's own conversation speak for the upstream: the
agent can send its proxy any request it likes and have the upstream fail it.

- the run's cap refused a call: ``budget-exhausted``;
- the harness's own conversation asked the upstream and never got an answer (failed, refused
  by the provider, or still unanswered when the harness ended): ``executor-failed``;
- after an answer, its own last request failed and the harness gave up without its closing
  line: ``executor-failed``;
- either of those, outside the canary, only when the worker's own minimal call to the same model
  (made after the harness ended, through the fleet's limiter, out of the agent's reach) fails
  too. The proxy cannot tell a request that copies the case prompt from the harness's own, so
  the agent (or a repo's hook, which sees the prompt) can have the upstream fail its "own"
  conversation and kill the harness: when the upstream answers the worker, the failure was the
  case's, graded as ``upstream-failed-own-requests``;
- the harness never asked its model anything: behaviour (``no-model-call``). Its canary, run
  through the same proxy and sandbox before the cases, proved that this harness starts and
  asks; what stopped it in a case is what the case added: the repo's plugin hooks and
  servers, its files, the agent's commands. Only the canary itself (``probe``), where nothing
  of a repo runs, makes it infra;
- its event stream was cut at the sandbox's output cap: behaviour (``stream-cut``), graded on
  what was recorded before the cut: only a command of the agent's (or the repo's code) can
  print that much.
"""

from __future__ import annotations

from collections.abc import Callable

from harnesses.model_record import ProxyRecord
from schemas.errors import BudgetExhausted, ExecutorFailed
from schemas.trajectory import AssistantEvent, EndReason
from worker.executor.external import tail_of
from worker.sandbox import CommandResult

UpstreamCheck = Callable[[], str | None]
"""The worker's own minimal call to the shard's model: None when it was answered, else why not."""


def settle_end(
    where: str,
    record: ProxyRecord,
    result: CommandResult,
    *,
    saw_result: bool,
    probe: bool = False,
    upstream_check: UpstreamCheck | None = None,
) -> EndReason | None:
    """Raise :class:`BudgetExhausted` or :class:`ExecutorFailed` when the record shows a cause outside
    the agent; else the end reason the record forces (``no-model-call``, ``stream-cut``,
    ``upstream-failed-own-requests``), or None when the harness's stream (or a budget, or the wall
    clock) says how it ended.

    ``probe``: the canary's run, where a harness that never asks its model is broken itself.
    ``upstream_check``: called (once, and only when the record alone would make the shard infra)
    to corroborate the upstream's failure; without it the record decides alone.
    """
    if record.run_budget_end is not None:  # the run's cap, not the agent: never judged as behaviour
        raise BudgetExhausted(f"{where}: {record.run_budget_end}")
    failed = _infra_failure(where, record, result, saw_result=saw_result, probe=probe)
    if failed is not None:
        if probe or upstream_check is None:
            raise failed
        why = upstream_check()
        if why is not None:
            raise ExecutorFailed(f"{failed.detail}; the worker's own call failed too: {why}")
        return EndReason.UPSTREAM_FAILED_OWN_REQUESTS
    if result.truncated:
        return EndReason.STREAM_CUT
    if not any(not turn.side for turn in record.turns):
        return EndReason.NO_MODEL_CALL
    return None


def _infra_failure(
    where: str, record: ProxyRecord, result: CommandResult, *, saw_result: bool, probe: bool
) -> ExecutorFailed | None:
    """The infra failure the record alone shows, or None."""
    answered = any(not turn.side for turn in record.turns)
    if not answered and (record.asked or probe):
        if result.limit == "timeout":
            return ExecutorFailed(f"{where}: no model response within the wall clock: {tail_of(result.output)}")
        why = f"upstream kept failing ({record.last_error})" if record.upstream_failures else "no model call"
        if record.refused:
            why += f"; the proxy refused: {record.refused[-1]}"
        return ExecutorFailed(f"{where}: failed before its first model response, {why}: {tail_of(result.output)}")
    if answered and not record.last_upstream_ok and not saw_result:
        return ExecutorFailed(f"{where}: the upstream kept failing until the harness gave up: {record.last_error}")
    return None


def end_notes(over: str | None, forced: EndReason | None, record: ProxyRecord) -> list[AssistantEvent]:
    """The product's own words on how the run ended, for the judge and the report."""
    if over:
        return [AssistantEvent(text=f"(run ended by the product: {over})")]
    if forced is EndReason.UPSTREAM_FAILED_OWN_REQUESTS:
        why = record.last_error or "no answer"
        return [
            AssistantEvent(text=f"(run ended: the upstream failed the conversation ({why}) but answered the worker)")
        ]
    return []
