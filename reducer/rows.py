"""A shard's row in the reports: from its full records, or what its outcome line holds of a blocked one. Pure."""

from __future__ import annotations

from reducer.counters import usage_from
from reducer.scoring import composite
from schemas.outcome import OutcomeLine
from schemas.report import CaseRun
from schemas.shard import row_name
from schemas.shard_outcome import ShardOutcome
from schemas.status import SandboxMode, ShardState
from schemas.trajectory import Usage

KEEP_BLOCKED = 1000
"""Blocked shards listed per corpus and variant in a streamed result (the count is always exact)."""

ROWS_NOT_KEPT = (
    "Reduced from the run's outcome segments ({shards} shards): per-shard rows are not kept; every "
    "figure above counts all of them. The full records of each shard stay in the store."
)
"""What the reports say where a streamed result has no per-shard rows to show."""


def case_row(o: ShardOutcome, line: OutcomeLine | None) -> CaseRun:
    """A shard's row in the reports, from its full records (``line``: its outcome line, None when it never ended)."""
    graded = o.state is ShardState.GRADED and o.grade is not None and line is not None
    judge_usage = Usage()
    for j in o.grade.judges if o.grade else []:
        judge_usage = judge_usage.add(j.usage)
    return CaseRun(
        shard_id=o.shard.shard_id,
        case_id=o.shard.case_id,
        model=o.shard.row,
        epoch=o.shard.epoch,
        state=o.state,
        verdicts=o.grade.verdicts if graded and o.grade else [],
        judges=o.grade.judges if o.grade else [],
        composite=composite(line.passed, line.weights) if graded and line is not None else None,
        detail=o.detail or (o.grade.error if o.grade else ""),
        stops_run=o.stops_run,
        sandbox=o.sandbox,
        end_reason=o.end_reason,
        usage=o.usage,
        judge_usage=judge_usage,
        skill_activated=o.skill_activated,
        rejected_calls=list(o.rejected_calls),
        mock_findings=list(o.mock_findings),
        proposed_calls=list(o.proposed_calls),
        refused_requests=list(o.refused_requests),
        mock_calls=list(o.mock_calls),
        http_calls=list(o.http_calls),
    )


def blocked_row(line: OutcomeLine) -> CaseRun:
    """What a streamed result lists of a blocked shard: what its line holds."""
    return CaseRun(
        shard_id=line.shard_id,
        case_id=line.case_id,
        model=row_name(line.model, line.harness),
        epoch=line.epoch,
        state=line.state,
        detail=line.detail,
        stops_run=line.stops_run,
        sandbox=SandboxMode(line.sandbox) if line.sandbox else None,
        end_reason=line.end_reason,
        usage=usage_from(line.usage),
    )
