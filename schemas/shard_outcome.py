"""A shard's end as the reducer folds it: the full records (:class:`ShardOutcome`) and the compact line.

Both sides build these: a worker writes a shard's :class:`OutcomeLine` when it ends, the store
reader rebuilds lines and outcomes from the per-shard records, and the reducer folds lines
(keeping each outcome's row when it keeps rows). They live here, in the pure ground both
sides share, so that neither ``engine`` nor ``reducer`` imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from schemas.outcome import LINE_DETAIL_CHARS, OutcomeLine, ShardOutcomeRecord
from schemas.shard import Shard
from schemas.status import SandboxMode, ShardState
from schemas.trajectory import Trajectory, Usage
from schemas.verdict import ShardGrade


@dataclass(frozen=True)
class ShardOutcome:
    """What the reducer needs to know about one shard."""

    shard: Shard
    state: ShardState
    grade: ShardGrade | None = None
    detail: str = ""
    sandbox: SandboxMode | None = None
    end_reason: str = ""
    usage: Usage = field(default_factory=Usage)
    template_hashes: Mapping[str, str] = field(default_factory=dict)
    """Prompt template hashes the executor used for this shard (the grade carries the judge's)."""
    stops_run: bool = False
    """Blocked by a status that stops the run (the error's ``stops_run``)."""
    skill_activated: bool | None = None
    """Whether the skill was loaded: the harness's record, else whether it fired (:func:`skill_loaded`)."""
    rejected_calls: tuple[str, ...] = ()
    """Tool calls the harness's stream claimed that no proxied model response held."""
    mock_findings: tuple[str, ...] = ()
    """Mocked MCP calls whose input failed an ``expect`` guard (docs/design/mocks.md)."""
    skills_fired: tuple[str, ...] | None = None
    """Trigger runs: the skills the executor activated, in order (None: not a trigger run)."""
    proposed_calls: tuple[str, ...] = ()
    """Tool calls the model proposed that the harness never ran (listed, never counted)."""
    refused_requests: tuple[str, ...] = ()
    """Model requests the harness's proxy refused for what they asked (the agent's doing)."""
    mock_calls: tuple[str, ...] = ()
    """The mocked MCP calls, one line each with its status (:func:`schemas.call_lines.mock_call_lines`)."""
    http_calls: tuple[str, ...] = ()
    """The sandbox's HTTP requests, one line each with its status (:func:`schemas.call_lines.http_call_lines`)."""

    def __post_init__(self) -> None:
        # Frozen: set once here so every row and line built from this outcome says the same.
        object.__setattr__(
            self, "skill_activated", skill_loaded(self.shard.skill, self.skill_activated, self.skills_fired)
        )


def skill_loaded(skill: str, recorded: bool | None, fired: Sequence[str] | None) -> bool | None:
    """Whether the skill under test was loaded: a harness executor's own flag, else whether it is among
    the skills a trigger shard of the built-in agent fired (None: neither was recorded). Outcome lines
    and rows store it; the reduce derives it again for a line stored before lines did."""
    if recorded is not None or fired is None:
        return recorded
    return skill in fired


def usage_tuple(u: Usage) -> tuple[int, int, int, float | None]:
    """A usage as an outcome line keeps it: (prompt, completion, calls, cost)."""
    return (u.prompt_tokens, u.completion_tokens, u.calls, u.cost_usd)


def outcome_line(
    shard: Shard, record: ShardOutcomeRecord, grade: ShardGrade | None, trajectory: Trajectory | None
) -> OutcomeLine:
    """The compact line of a shard's end: the same facts the full records give the reducer.

    A grade whose state differs from the record's is left over from an earlier attempt and
    ignored, as the full-record reduce ignores it.
    """
    if grade is not None and grade.state is not record.state:
        grade = None
    verdicts = grade.verdicts if grade is not None and record.state is ShardState.GRADED else []
    graded_judges = [j for j in grade.judges if j.state is ShardState.GRADED] if grade else []
    disagreed = [
        (
            int(len({j.verdicts[i].passed for j in graded_judges if len(j.verdicts) > i}) > 1)
            if v.check == "judge" and len(graded_judges) > 1
            else -1
        )
        for i, v in enumerate(verdicts)
    ]
    checked = [v.evidence_verified for v in verdicts if v.passed and v.evidence_verified is not None]
    pairs = [p.share for p in grade.agreement] if grade else []
    hashes = dict(trajectory.template_hashes) if trajectory else {}
    if grade is not None:
        hashes.update(grade.template_hashes)
    judge_usage: dict[str, Usage] = {}
    for j in grade.judges if grade else []:
        judge_usage[j.judge] = judge_usage.get(j.judge, Usage()).add(j.usage)
    return OutcomeLine(
        shard_id=shard.shard_id,
        variant=shard.variant,
        skill=shard.skill,
        case_id=shard.case_id,
        model=shard.model,
        epoch=shard.epoch,
        state=record.state,
        harness=shard.harness,
        status=record.status,
        detail=(record.detail or (grade.error if grade else ""))[:LINE_DETAIL_CHARS],
        stops_run=record.stops_run,
        passed=[v.passed for v in verdicts],
        weights=[v.weight for v in verdicts] if any(v.weight != 1.0 for v in verdicts) else [],
        judged=[v.check == "judge" for v in verdicts] if any(v.check != "judge" for v in verdicts) else [],
        disagreed=disagreed if any(d >= 0 for d in disagreed) else [],
        verified=(sum(checked), len(checked)),
        agreement=(sum(pairs), len(pairs)),
        unanimous=grade.unanimous_share if grade else None,
        usage=usage_tuple(trajectory.usage) if trajectory else (0, 0, 0, None),
        judge_usage={judge: usage_tuple(u) for judge, u in judge_usage.items()},
        sandbox=trajectory.sandbox.value if trajectory else None,
        end_reason=trajectory.end_reason.value if trajectory else "",
        template_hashes=hashes,
        skill_activated=skill_loaded(shard.skill, trajectory.skill_activated, trajectory.skills_fired)
        if trajectory
        else None,
        rejected_calls=len(trajectory.rejected_calls) if trajectory else 0,
        skills_fired=list(trajectory.skills_fired) if trajectory and trajectory.skills_fired is not None else None,
    )


def outcome_line_of(o: ShardOutcome) -> OutcomeLine:
    """The outcome line of a shard read back from its full records."""
    record = ShardOutcomeRecord(state=o.state, detail=o.detail, stops_run=o.stops_run)
    line = outcome_line(o.shard, record, o.grade, None)
    return line.model_copy(
        update={
            "sandbox": o.sandbox.value if o.sandbox else None,
            "end_reason": o.end_reason,
            "usage": usage_tuple(o.usage),
            "template_hashes": {**o.template_hashes, **(o.grade.template_hashes if o.grade else {})},
            "skill_activated": o.skill_activated,
            "rejected_calls": len(o.rejected_calls),
            "skills_fired": list(o.skills_fired) if o.skills_fired is not None else None,
        }
    )
