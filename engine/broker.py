"""The broker seam: what sends a task message, and which queue a shard's message goes to.

A message names ids only (the run, and the shard for execute and grade); the worker reads
everything else from the store. Both sides send: the client a run's first messages and a
resubmit's, a worker the next step of a shard (grade after execute), a run's reduce, and the
reaper's re-sends. They all go through a :class:`Broker`: the Celery one
(:class:`worker.app.CeleryBroker`) in the product, :class:`InProcessBroker` where a test
needs to see what was sent without a worker to take it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import NamedTuple, Protocol

from schemas.constants import QUEUE_EXECUTE, QUEUE_GRADE
from schemas.status import ShardState

WAITING_QUEUE = {ShardState.QUEUED: QUEUE_EXECUTE, ShardState.EXECUTED: QUEUE_GRADE}
"""The queue a shard waiting in each state is sent to."""
LEASED_QUEUE = {ShardState.EXECUTING: QUEUE_EXECUTE, ShardState.GRADING: QUEUE_GRADE}
"""The queue whose task holds a shard leased in each state."""
WAITING_STATES = tuple(WAITING_QUEUE)
"""States in which a shard waits for a message (execute, grade) and no worker holds it."""
DRAINED = float(2**53)
"""The watermark of an empty queue: every message sent until now has left it (engine/delivery.py)."""
PUBLISH_BATCH = 1000
"""Messages a broker publishes per round trip (and a run's submission confirms at a time); each is
still its own message, acked on its own."""


class NotOnAQueue(ValueError):
    """A shard in a state no queue's task takes (a terminal one) was given a queue."""


def queue_of(state: ShardState) -> str:
    """The queue of a shard in ``state``: where it is sent while waiting, whose task holds it while leased."""
    queue = WAITING_QUEUE.get(state) or LEASED_QUEUE.get(state)
    if queue is None:
        raise NotOnAQueue(f"a {state.value} shard is on no queue")
    return queue


class Broker(Protocol):
    """Sends ids-only task messages to the queues."""

    def send(self, queue: str, run_id: str, shard_id: str | None = None) -> None:
        """Put one execute or grade message (``shard_id``) or reduce message (None) on ``queue``."""

    def preflight(self, run_id: str, queue: str) -> None:
        """Ask a worker of ``queue`` to check the run's models (producer/launch/preflight.py waits for its report)."""

    def host_check(self, run_id: str) -> None:
        """Ask an execute worker to check its host for the run: the sandbox, the executor's canary
        (worker/host_check.py; producer/launch/preflight.py waits for its report)."""

    def batch(self) -> AbstractContextManager[None]:
        """A block whose messages go out together when it ends (each still its own message)."""


def send_shard(broker: Broker, run_id: str, shard_id: str, state: ShardState) -> None:
    """Send a waiting shard's message to the queue of its ``state`` (queued: execute; executed: grade)."""
    broker.send(queue_of(state), run_id, shard_id)


class Message(NamedTuple):
    queue: str
    run_id: str
    shard_id: str | None


class InProcessBroker:
    """A :class:`Broker` that keeps its messages in a list, in the order sent, and runs nothing.

    A test that plays the workers itself takes the messages in order with :meth:`take`; the
    list keeps every message sent, taken or not.
    """

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._taken = 0
        self.preflights: list[tuple[str, str]] = []
        self.host_checks: list[str] = []
        self.batches = 0
        """Blocks opened with :meth:`batch` (and ended)."""

    def send(self, queue: str, run_id: str, shard_id: str | None = None) -> None:
        self.messages.append(Message(queue, run_id, shard_id))

    def preflight(self, run_id: str, queue: str) -> None:
        self.preflights.append((run_id, queue))

    def host_check(self, run_id: str) -> None:
        self.host_checks.append(run_id)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        yield
        self.batches += 1

    def take(self) -> Message | None:
        """The oldest message not taken yet (first in, first out, as a queue), or None."""
        if self._taken == len(self.messages):
            return None
        self._taken += 1
        return self.messages[self._taken - 1]

    def on(self, queue: str) -> list[Message]:
        """The messages sent to ``queue``, in order."""
        return [m for m in self.messages if m.queue == queue]
