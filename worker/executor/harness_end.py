"""How a harness shard ended: infra, or behaviour graded on what was recorded.

The rule (docs/design/failure-taxonomy.md) reads the proxy's record, never the harness's own
words, and only the requests of the harness's own conversation speak for the upstream: the
agent can send its proxy any request it likes and have the upstream fail it.

- the run's cap refused a call: ``budget-exhausted``;
- the harness's own conversation asked the upstream and never got an answer (failed, refused
  by the provider, or still unanswered when the harness ended): ``executor-failed``;
- after an answer, its own last request failed and the harness gave up without its closing
  line: ``executor-failed``;
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

from harnesses.model_record import ProxyRecord
from schemas.errors import BudgetExhausted, ExecutorFailed
from schemas.trajectory import EndReason
from worker.executor.external import tail_of
from worker.sandbox import CommandResult


def settle_end(
    where: str, record: ProxyRecord, result: CommandResult, *, saw_result: bool, probe: bool = False
) -> EndReason | None:
    """Raise :class:`BudgetExhausted` or :class:`ExecutorFailed` when the record shows a cause outside
    the agent; else the end reason the record forces (``no-model-call``, ``stream-cut``), or None
    when the harness's stream (or a budget, or the wall clock) says how it ended.

    ``probe``: the canary's run, where a harness that never asks its model is broken itself.
    """
    if record.run_budget_end is not None:  # the run's cap, not the agent: never judged as behaviour
        raise BudgetExhausted(f"{where}: {record.run_budget_end}")
    answered = any(not turn.side for turn in record.turns)
    if not answered and (record.asked or probe):
        if result.limit == "timeout":
            raise ExecutorFailed(f"{where}: no model response within the wall clock: {tail_of(result.output)}")
        why = f"upstream kept failing ({record.last_error})" if record.upstream_failures else "no model call"
        if record.refused:
            why += f"; the proxy refused: {record.refused[-1]}"
        raise ExecutorFailed(f"{where}: failed before its first model response, {why}: {tail_of(result.output)}")
    if answered and not record.last_upstream_ok and not saw_result:
        raise ExecutorFailed(f"{where}: the upstream kept failing until the harness gave up: {record.last_error}")
    if result.truncated:
        return EndReason.STREAM_CUT
    if not answered:
        return EndReason.NO_MODEL_CALL
    return None
