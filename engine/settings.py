"""Worker and client settings: one typed object built from flags and ``SKILL_EVAL_*`` env variables."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.errors import ConfigError
from schemas.status import SandboxMode

ENV_PREFIX = "SKILL_EVAL_"


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/skill-eval`` (``~/.local/share/skill-eval``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "skill-eval"


_TMPFS = Path("/dev/shm")
_TMPFS_MIN_FREE = 2 * 1024**3  # Docker's default /dev/shm is 64 MB: far too small for workspaces


def shown_url(url: str) -> str:
    """A broker URL fit to print: its password, if any, hidden."""
    return re.sub(r"(//[^/@]*?:)[^/@]*@", r"\1***@", url)


def default_work_root() -> Path:
    """Where workspaces and the unpacked-snapshot cache go unless configured: a tmpfs when it has room.

    A workspace costs one file creation per repo file; on tmpfs that is ~30 ms for 1,000
    files, on a busy ext4 disk it can be a second (bench/bench_workspace.py). Falls back to
    the system temp folder when ``/dev/shm`` is missing, read-only or has less than 2 GiB free.
    """
    try:
        st = os.statvfs(_TMPFS)
        if os.access(_TMPFS, os.W_OK) and st.f_bavail * st.f_frsize >= _TMPFS_MIN_FREE:
            return _TMPFS / "skill-eval"
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / "skill-eval"


class Settings(BaseSettings):
    """Where the broker and store are, where workspaces go, and the engine's timing.

    A value that does not fit its field raises :class:`ConfigError` naming the variable (or the
    keyword) it came from: a mistyped ``SKILL_EVAL_*`` value is the user's to fix, not a crash.
    """

    # No inf or nan: a lease or a period of inf seconds never expires, and nan compares false to all.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", allow_inf_nan=False)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError("; ".join(_problem(e, given=values) for e in exc.errors())) from None

    broker_url: str | None = None
    """Redis URL of the broker and state store; None means: start an embedded one-host cluster."""
    store: str = Field(default_factory=lambda: str(default_data_dir() / "store"))
    """Artifact store URI: a local folder, ``file:///...`` or ``s3://bucket/prefix``."""
    workdir: Path = Field(default_factory=default_work_root)
    """Where workspaces and the unpacked-snapshot cache live on a worker host (a tmpfs when it has room:
    creating a workspace's files on a busy disk costs ~10x more, see bench/bench_workspace.py)."""
    sandbox: SandboxMode = SandboxMode.BWRAP
    """How executor tool calls are confined; ``none`` only when asked for explicitly."""
    worker_processes: int | None = Field(default=None, ge=1)
    """Worker processes of an embedded cluster; None: one per 16 shards in flight, at most one per
    core (producer/launch/embedded.py: plan_processes)."""
    lease_ttl_s: float = 30.0
    """A shard's heartbeat lease; a dead worker's shard is re-queued within about this plus one reaper period."""
    reaper_period_s: float = 10.0
    """How often the fleet's reaper looks for expired leases and unsent shards (one worker per period)."""
    unsent_grace_s: float = 30.0
    """A shard registered this long ago whose message was never confirmed sent is sent by the reaper.
    Publishers confirm every batch of messages within about a second, so this only catches a
    publisher (or reaper) that died between registering a shard and publishing it."""
    redeliver_after_s: float = Field(default=60.0, gt=0)
    """A waiting shard whose message left its queue this long ago and was never claimed (taken by a
    worker that died before claiming it) is sent again by the reaper (engine/delivery.py). It must
    outlast a live worker's delay between taking a message and claiming its shard, or that shard gets
    a duplicate message (a no-op delivery); docs/design/cluster.md, "Delivery from the ledger"."""
    visibility_timeout_s: float = 4 * 3600.0
    """Broker redelivery of unacked messages. It must exceed the longest allowed task (a task that outlives
    it runs twice) and, as it is shared by every queue on the broker database, it is the longest one;
    fast recovery from dead workers comes from leases, not from this."""
    run_log: Path = Field(default_factory=lambda: default_data_dir() / "runs.log")
    """File the contract's run-log line is appended to (``SKILL_EVAL_RUN_LOG``)."""
    max_shard_timeout_s: float = Field(default=3600.0, gt=0)
    """Fleet-wide ceiling on a run's ``--shard-timeout`` (executor wall clock per shard). Every run is
    checked against it at submit, and a worker's shutdown grace period (Kubernetes
    ``terminationGracePeriodSeconds``) is sized to at least it, so a scale-down can let a shard finish."""
    node_name: str | None = None
    """This worker node's name (Celery's ``-n``) and the key of its liveness record; ``skill-eval worker``
    sets it, and ``skill-eval worker --health`` reads the same variable (docs/design/deployment.md)."""
    shutdown_grace_s: float | None = Field(default=None, gt=0)
    """Seconds a worker has from SIGTERM until it is killed (the orchestrator's grace period). Running
    shards may finish until shortly before; then they are handed back. None: wait for them, unbounded."""
    stream_reduce_shards: int = Field(default=20_000, ge=1)
    """A run of at least this many shards is reduced from its outcome segments (counters, no
    per-shard rows in the result); smaller runs keep every shard's full record in the report
    (docs/design/cluster.md, "Reduce")."""
    node_beat_s: float = 5.0
    """How often a worker node writes its liveness record."""
    health_stale_s: float = 60.0
    """``--health`` fails when the node's last heartbeat is older than this."""
    health_idle_s: float = 120.0
    """``--health`` fails when the node has a free slot, its queues hold messages, and it took none for this long."""
    warm: bool | None = None
    """Whether an embedded run uses and leaves a warm spare worker; None: only on a terminal. The
    entry point reads it before this object can be built (producer/launch/warm.py) and leaves no
    spare for a value that does not fit; a command building settings then refuses it here."""
    warm_idle_s: float = Field(default=900.0, gt=0)
    """Seconds a warm spare waits for the next command before it exits."""

    @model_validator(mode="after")
    def _ceiling_below_redelivery(self) -> Settings:
        # A task outliving the visibility timeout runs twice; the longest task is a shard at the ceiling
        # plus its workspace and upload margin (worker/app.py: time_limits).
        if self.max_shard_timeout_s + 600 > self.visibility_timeout_s:
            raise ValueError(
                f"SKILL_EVAL_MAX_SHARD_TIMEOUT_S={self.max_shard_timeout_s:g} must stay 600 s below "
                f"SKILL_EVAL_VISIBILITY_TIMEOUT_S={self.visibility_timeout_s:g}"
            )
        return self

    @property
    def workspaces_dir(self) -> Path:
        return self.workdir / "workspaces"

    @property
    def cache_dir(self) -> Path:
        return self.workdir / "snapshots"


def _problem(error: ErrorDetails, *, given: dict[str, Any]) -> str:
    """One field's validation error as ``SKILL_EVAL_LEASE_TTL_S: 'abc' is not a number``."""
    ctx = error.get("ctx", {})
    message = {
        "float_parsing": "is not a number",
        "finite_number": "is not a finite number",
        "int_parsing": "is not a whole number",
        "int_from_float": "is not a whole number",
        "bool_parsing": "is not true or false",
        "enum": f"must be {ctx.get('expected')}",
        "greater_than": f"must be above {ctx.get('gt', 0):g}",
        "greater_than_equal": f"must be at least {ctx.get('ge', 0):g}",
    }.get(error["type"])
    if not error["loc"]:  # a rule across fields: its message names the variables itself
        return error["msg"].removeprefix("Value error, ")
    field = str(error["loc"][0])
    where = field if field in given else f"{ENV_PREFIX}{field.upper()}"
    if message is None:
        message = error["msg"].removeprefix("Value error, ")
        message = message[:1].lower() + message[1:]
    return f"{where}: {error['input']!r} {message}"
