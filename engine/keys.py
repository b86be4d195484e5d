"""Every Redis key skill-eval uses, built here and nowhere else.

One prefix (``skill-eval``) so a shared Redis can host other tenants and a test can flush
exactly ours. Per run (``skill-eval:run:<run_id>``):

- the run hash: ``total``, ``terminal`` (shards in a terminal state), ``manifest``,
  ``created``, ``reduced``;
- ``…:states`` hash shard id -> state; ``…:leases`` sorted set shard id -> lease expiry (ms);
  ``…:owners`` hash shard id -> lease token; ``…:attempts`` hash ``<shard>:<leased state>`` -> claims
  (``RunKeys.claims``: the name of the key predates the counting of claims apart from resubmits);
  ``…:unrecorded`` hash ``<shard>:<leased state>:<attempt>`` -> the store's error that kept a
  worker from recording how the shard ended (cited when the shard is given up);
- ``…:calibrating:<judge>`` the lock of the worker calibrating that judge;
- ``…:usage:<model>`` and ``…:usage-models`` the run's usage counters;
- ``…:unsent`` sorted set shard id -> when noted (ms): registered or reaped shards whose
  message is not yet confirmed published;
- ``…:waiting`` sorted set shard id -> when its latest message was sent (ms): every shard
  waiting for a message (queued or executed) that no lease holds, the delivery ledger;
- ``…:preflight:<queue>`` a worker's preflight report; ``…:resubmits`` hash shard id ->
  resubmitted attempts so far;
- ``…:budget`` hash (caps, spent, reserved) and ``…:budget:models`` (models out of credit);
- ``…:lines`` list of outcome lines not yet sealed, ``…:lines:seq`` the segment counter,
  ``…:lines:pending`` set and ``…:lines:pending:<n>`` lists of segments cut but not yet stored.

Fleet-wide: ``skill-eval:runs`` (set of active runs, the reaper's worklist),
``skill-eval:reaper-lock`` (one reaper pass per period in the fleet),
``skill-eval:inflight:<queue>`` (leased shards per queue, for autoscaling),
``skill-eval:node:<node>`` (a worker node's liveness record),
``skill-eval:server`` (the Redis server run id the fleet last saw: a restart changes it),
``skill-eval:watermark:<queue>`` (samples of the queue's watermark, engine/delivery.py),
``skill-eval:limit:<model>:state|leases`` (the rate limiter), ``skill-eval:usage:<model>`` and
``skill-eval:usage-models`` (all-time usage). Store keys (artifacts) live in
``schemas.manifest``; they are paths, not Redis keys.
"""

from __future__ import annotations

from typing import NamedTuple

from schemas.constants import KEY_PREFIX


class RunKeys(NamedTuple):
    """The Redis keys of one run (``skill-eval:run:<run_id>`` and below it), each in one place."""

    run: str
    states: str
    leases: str
    owners: str
    claims: str
    unsent: str
    waiting: str
    """The delivery ledger: waiting shards without a lease -> when their latest message was sent (ms)."""
    resubmits: str
    reduced_signal: str
    """A list holding one token once the run is reduced: a waiting client blocks on it (BLPOP)."""
    preflight_signal: str
    """A one-token list raised with each preflight report stored: the producer blocks on it (BLPOP)."""
    budget: str
    budget_models: str
    unrecorded: str
    """Why a worker could not record a shard's end in the store, per claim phase and attempt."""

    @property
    def lease(self) -> tuple[str, str, str]:
        """``KEYS[1..3]`` of every script that takes, hands back or reaps a lease: states, leases, owners."""
        return (self.states, self.leases, self.owners)


def run_keys(run_id: str) -> RunKeys:
    base = f"{KEY_PREFIX}:run:{run_id}"
    return RunKeys(
        run=base,
        states=f"{base}:states",
        leases=f"{base}:leases",
        owners=f"{base}:owners",
        claims=f"{base}:attempts",
        unsent=f"{base}:unsent",
        waiting=f"{base}:waiting",
        resubmits=f"{base}:resubmits",
        reduced_signal=f"{base}:reduced-signal",
        preflight_signal=f"{base}:preflight-signal",
        budget=f"{base}:budget",
        budget_models=f"{base}:budget:models",
        unrecorded=f"{base}:unrecorded",
    )


def claims_field(shard_id: str, leased: str) -> str:
    """The field of ``RunKeys.claims`` counting claims of ``shard_id`` into ``leased``."""
    return f"{shard_id}:{leased}"


def unrecorded_field(shard_id: str, leased: str, attempt: int) -> str:
    """The field of ``RunKeys.unrecorded`` for ``shard_id``'s claims into ``leased`` in ``attempt``
    (a resubmitted attempt starts without the earlier attempt's note)."""
    return f"{shard_id}:{leased}:{attempt}"


def active_runs_key() -> str:
    return f"{KEY_PREFIX}:runs"


def calibrating_key(run_id: str, judge: str) -> str:
    return f"{KEY_PREFIX}:run:{run_id}:calibrating:{judge}"


def server_key() -> str:
    """The Redis server's ``INFO run_id`` the fleet last saw; a restart of the server changes the run id."""
    return f"{KEY_PREFIX}:server"


def limiter_keys(model: str) -> tuple[str, str]:
    """(state hash, leases sorted set) of the model's fleet-wide rate limiter."""
    base = f"{KEY_PREFIX}:limit:{model}"
    return base + ":state", base + ":leases"


def usage_key(model: str, run_id: str | None = None) -> str:
    """The usage counters of ``model``: for one run, or for all time (``run_id`` None)."""
    return f"{KEY_PREFIX}:run:{run_id}:usage:{model}" if run_id else f"{KEY_PREFIX}:usage:{model}"


def usage_models_key(run_id: str | None = None) -> str:
    """The set of models with usage counters: for one run, or for all time."""
    return f"{KEY_PREFIX}:run:{run_id}:usage-models" if run_id else f"{KEY_PREFIX}:usage-models"


def watermark_key(queue: str) -> str:
    """Samples of ``queue``'s watermark (when seen -> the send time before which every message had left)."""
    return f"{KEY_PREFIX}:watermark:{queue}"


def preflight_key(run_id: str, queue: str) -> str:
    return f"{KEY_PREFIX}:run:{run_id}:preflight:{queue}"


def reaper_lock_key() -> str:
    return f"{KEY_PREFIX}:reaper-lock"


def inflight_key(queue: str) -> str:
    """The fleet-wide list of leased shards of ``queue`` (``<run>|<shard>`` entries) autoscalers read."""
    return f"{KEY_PREFIX}:inflight:{queue}"


def node_key(node: str) -> str:
    """A worker node's liveness record (heartbeat, last message taken, busy slots)."""
    return f"{KEY_PREFIX}:node:{node}"


class SegmentKeys(NamedTuple):
    """The Redis keys of one run's outcome lines (engine/segments.py)."""

    lines: str
    """List of the lines not yet in a segment."""
    seq: str
    """Counter numbering the run's segments."""
    pending: str
    """Set of segment numbers cut from the list but not yet written to the store."""
    pending_prefix: str
    """``<prefix><n>``: the lines of pending segment n."""


def segment_keys(run_id: str) -> SegmentKeys:
    base = f"{KEY_PREFIX}:run:{run_id}:lines"
    return SegmentKeys(base, base + ":seq", base + ":pending", base + ":pending:")
