"""Outcome segments: every shard's end as one compact line, sealed 2,500 at a time into one object.

A worker that ends a shard pushes its :class:`OutcomeLine` onto the run's list in Redis. The
push that fills the list to ``SEGMENT_LINES`` renames it, in the same Lua call, to a pending
segment named by the server's clock and a counter; that worker then writes the pending
lines to the store as ``runs/<run>/segments/<id>.jsonl`` and drops the pending key. The
reducer first seals whatever is left (pending segments whose writer died, and the partial
tail), then streams the segment objects in the order they were cut. So a reduce of a
million shards reads about 400 objects instead of three million, and never needs the
shard list.

Order is the guarantee the reducer leans on: a line pushed later lands in the same or a
later segment, later in it. A shard's newer attempt (a resubmit, a regrade) was pushed
after its older one, so reading from the end the first line of a shard is its latest.

What can go wrong, and what covers it: a worker dying between the rename and the write
leaves a pending key the next seal writes (same id, same bytes, so two sealers agree); a
Redis that lost its data loses unsealed lines, which the reducer notices (fewer shards in
the segments than ended shards in the run state) and rebuilds from the per-shard records
(:func:`engine.collect.reduce_streamed`); a Redis restart also resets the counter, which is
why an id starts with the server's clock.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis
from pydantic import ValidationError

from engine.keys import segment_keys
from engine.scripts import register
from engine.store import ArtifactStore
from schemas.outcome import LINE_DETAIL_CHARS, OutcomeLine, ShardOutcomeRecord
from schemas.shard import Shard
from schemas.status import ShardState
from schemas.trajectory import Trajectory, Usage
from schemas.verdict import ShardGrade

SEGMENT_LINES = 2500
"""Lines per sealed segment: about 1.5 MB of JSON, one store request for 2,500 shards (a reduce of
a million shards on S3 is about 400 reads)."""


def segment_prefix(run_id: str) -> str:
    """Where a run's sealed segments live in the store."""
    return f"runs/{run_id}/segments/"


def segment_key(run_id: str, segment_id: str) -> str:
    """``<time><counter>`` ids, zero-padded: the store's lexical listing is the order they were cut in."""
    return f"{segment_prefix(run_id)}{segment_id}.jsonl"


def _usage(u: Usage) -> tuple[int, int, int, float | None]:
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
        usage=_usage(trajectory.usage) if trajectory else (0, 0, 0, None),
        judge_usage={judge: _usage(u) for judge, u in judge_usage.items()},
        sandbox=trajectory.sandbox.value if trajectory else None,
        end_reason=trajectory.end_reason.value if trajectory else "",
        template_hashes=hashes,
        skill_activated=trajectory.skill_activated if trajectory else None,
        rejected_calls=len(trajectory.rejected_calls) if trajectory else 0,
        skills_fired=list(trajectory.skills_fired) if trajectory and trajectory.skills_fired is not None else None,
    )


def encode_segment(lines: Sequence[bytes]) -> bytes:
    """A segment object: one JSON line per shard end, newline-terminated."""
    return b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)


class SegmentWriter:
    """Push outcome lines and seal full segments into the store."""

    def __init__(self, client: redis.Redis, store: ArtifactStore, lines_per_segment: int = SEGMENT_LINES) -> None:
        self.r = client
        self.store = store
        self.size = lines_per_segment
        self._cut = register(client, "segments_cut")

    def push(self, run_id: str, line: OutcomeLine) -> str | None:
        """Add one shard's line; seal the segment it filled, if it filled one (and return its id)."""
        k = segment_keys(run_id)
        cut = self._cut(keys=[k.lines, k.seq, k.pending], args=[line.model_dump_json(), self.size, k.pending_prefix])
        if not cut:
            return None
        segment_id = _text(cut)
        self.seal(run_id, segment_id)
        return segment_id

    def seal(self, run_id: str, segment_id: str) -> None:
        """Write pending segment ``segment_id`` to the store, then drop it from Redis (a repeat writes the same)."""
        k = segment_keys(run_id)
        pending = f"{k.pending_prefix}{segment_id}"
        lines = [x if isinstance(x, bytes) else x.encode() for x in self.r.lrange(pending, 0, -1)]
        if lines:
            self.store.put(segment_key(run_id, segment_id), encode_segment(lines))
        pipe = self.r.pipeline()
        pipe.delete(pending)
        pipe.srem(k.pending, segment_id)
        pipe.execute()

    def flush(self, run_id: str) -> int:
        """Seal every pending segment and the partial tail; the number of segments written."""
        k = segment_keys(run_id)
        self._cut(keys=[k.lines, k.seq, k.pending], args=["", self.size, k.pending_prefix])
        pending = sorted(_text(s) for s in self.r.smembers(k.pending))
        for segment_id in pending:
            self.seal(run_id, segment_id)
        return len(pending)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def segment_keys_in_store(store: ArtifactStore, run_id: str) -> list[str]:
    """The run's sealed segments, in the order they were cut (one listing, paged by the store)."""
    return sorted(store.list(segment_prefix(run_id)))


def read_segment(raw: bytes) -> tuple[list[OutcomeLine], int]:
    """The lines of one segment object, in order, and how many lines were unreadable.

    Each line is validated against the line model on its own (measured faster here than one
    validation of the whole segment as a list); a bad one (a torn write, a line of another
    release) is left out, and the reducer then finds fewer shards than ended and reads those
    from their full records.
    """
    good = []
    bad = 0
    for text in raw.splitlines():
        if not text.strip():
            continue
        try:
            good.append(OutcomeLine.model_validate_json(text))
        except ValidationError:
            bad += 1
    return good, bad
