"""Worker and client settings: one typed object built from flags and ``SKILL_EVAL_*`` env variables."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.status import SandboxMode


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/skill-eval`` (``~/.local/share/skill-eval``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "skill-eval"


_TMPFS = Path("/dev/shm")
_TMPFS_MIN_FREE = 2 * 1024**3  # Docker's default /dev/shm is 64 MB: far too small for workspaces


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
    """Where the broker and store are, where workspaces go, and the engine's timing."""

    model_config = SettingsConfigDict(env_prefix="SKILL_EVAL_", extra="ignore")

    broker_url: str | None = None
    """Redis URL of the broker and state store; None means: start an embedded one-host cluster."""
    store: str = Field(default_factory=lambda: str(default_data_dir() / "store"))
    """Artifact store URI: a local folder, ``file:///...`` or ``s3://bucket/prefix``."""
    workdir: Path = Field(default_factory=default_work_root)
    """Where workspaces and the unpacked-snapshot cache live on a worker host (a tmpfs when it has room:
    creating a workspace's files on a busy disk costs ~10x more, see bench/bench_workspace.py)."""
    sandbox: SandboxMode = SandboxMode.BWRAP
    """How executor tool calls are confined; ``none`` only when asked for explicitly."""
    lease_ttl_s: float = 30.0
    """A shard's heartbeat lease; a dead worker's shard is re-queued within about this plus one reaper period."""
    reaper_period_s: float = 10.0
    """How often the fleet's reaper looks for expired leases and unsent shards (one worker per period)."""
    unsent_grace_s: float = 30.0
    """A shard registered this long ago whose message was never confirmed sent is sent by the reaper.
    Publishers confirm every batch of messages within about a second, so this only catches a
    publisher (or reaper) that died between registering a shard and publishing it."""
    visibility_timeout_s: float = 4 * 3600.0
    """Broker redelivery of unacked messages. It must exceed the longest allowed task (a task that outlives
    it runs twice) and, as it is shared by every queue on the broker database, it is the longest one;
    fast recovery from dead workers comes from leases, not from this."""
    run_log: Path = Field(default_factory=lambda: default_data_dir() / "runs.log")
    """File the contract's run-log line is appended to (``SKILL_EVAL_RUN_LOG``)."""

    @property
    def workspaces_dir(self) -> Path:
        return self.workdir / "workspaces"

    @property
    def cache_dir(self) -> Path:
        return self.workdir / "snapshots"
