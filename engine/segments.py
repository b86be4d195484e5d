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
(:func:`reducer.from_store.run_result`); a Redis restart also resets the counter, which is
why an id starts with the server's clock.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis
from pydantic import ValidationError

from engine.keys import segment_keys
from engine.scripts import register, reply_text
from engine.store import ArtifactStore
from schemas.outcome import OutcomeLine

SEGMENT_LINES = 2500
"""Lines per sealed segment: about 1.5 MB of JSON, one store request for 2,500 shards (a reduce of
a million shards on S3 is about 400 reads)."""


def segment_prefix(run_id: str) -> str:
    """Where a run's sealed segments live in the store."""
    return f"runs/{run_id}/segments/"


def segment_key(run_id: str, segment_id: str) -> str:
    """``<time><counter>`` ids, zero-padded: the store's lexical listing is the order they were cut in."""
    return f"{segment_prefix(run_id)}{segment_id}.jsonl"


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
        segment_id = reply_text(cut)
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
        pending = sorted(reply_text(s) for s in self.r.smembers(k.pending))
        for segment_id in pending:
            self.seal(run_id, segment_id)
        return len(pending)


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
