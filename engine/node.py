"""One worker node's shape: the queues it serves, its shards in flight, its name, its log level.

Both starters use it: the embedded cluster and ``skill-eval worker``. A node boots Celery from
this description in its own process (worker/boot.py) rather than through Celery's command
line, whose start-up imports about 400 modules (its interactive shell's among them) that a
worker never uses: on 2 cores that was a third of a second on every embedded run's way to its
first model call.

Every node runs its shards on threads with a prefetch multiplier of one (it reserves exactly
the messages it runs) and without gossip, mingle or the event heartbeat (no peer chatter: the
leases in Redis are the only liveness record, engine/state.py). The queues are taken in
CONSUME_ORDER: a shard already started is finished before a new one starts.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from schemas.constants import CONSUME_ORDER

BOOT_MODULE = "worker.boot"
PYTHON = (sys.executable, "-P")
"""``-P``: neither the working folder nor a script's folder goes on a worker's import path, so a
repo under evaluation holding a ``worker/`` or ``celery/`` package never runs on the host."""


@dataclass(frozen=True)
class WorkerNode:
    queues: tuple[str, ...]
    concurrency: int
    """Shards in flight: threads of the node's one process."""
    name: str
    """Celery's node name, ``name@host``."""
    loglevel: str = "WARNING"

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"a worker node needs at least one slot, not {self.concurrency}")
        if not self.queues:
            raise ValueError("a worker node needs at least one queue")
        rank = {q: i for i, q in enumerate(CONSUME_ORDER)}
        ordered = tuple(sorted(dict.fromkeys(self.queues), key=lambda q: rank.get(q, len(rank))))
        object.__setattr__(self, "queues", ordered)

    @classmethod
    def serving(cls, queues: str, concurrency: int, name: str, loglevel: str = "WARNING") -> WorkerNode:
        """From a comma-separated queue list, as the command line takes it."""
        return cls(tuple(q for q in queues.split(",") if q), concurrency, name, loglevel)

    def to_json(self) -> str:
        return json.dumps(
            {"queues": list(self.queues), "concurrency": self.concurrency, "name": self.name, "loglevel": self.loglevel}
        )

    @classmethod
    def from_json(cls, text: str) -> WorkerNode:
        doc = json.loads(text)
        return cls(tuple(doc["queues"]), int(doc["concurrency"]), str(doc["name"]), str(doc.get("loglevel", "WARNING")))

    def command(self, *, check_sandbox: bool = False) -> list[str]:
        """The command line that starts this node in a new process; with ``check_sandbox`` the process
        first refuses to start (``BLOCKED_NO_SANDBOX``, exit 2) on a host where bubblewrap cannot work."""
        return [*PYTHON, "-m", BOOT_MODULE, *(["--check-sandbox"] if check_sandbox else []), self.to_json()]
