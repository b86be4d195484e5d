"""Statuses whose values are the contract's own strings."""

from __future__ import annotations

from enum import Enum, IntEnum


class ShardState(str, Enum):
    """Where a shard is in its life. States only move forward."""

    QUEUED = "queued"
    EXECUTING = "executing"
    EXECUTED = "executed"
    GRADING = "grading"
    GRADED = "graded"
    EXECUTOR_FAILED = "executor-failed"
    GRADER_MALFORMED = "grader-malformed"
    GRADER_DISPATCH_FAILED = "grader-dispatch-failed"
    BLOCKED = "blocked"
    BUDGET_EXHAUSTED = "budget-exhausted"
    """The run's cost or token cap (or the model's credit) stopped the shard before it finished."""

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset(
    {
        ShardState.GRADED,
        ShardState.EXECUTOR_FAILED,
        ShardState.GRADER_MALFORMED,
        ShardState.GRADER_DISPATCH_FAILED,
        ShardState.BLOCKED,
        ShardState.BUDGET_EXHAUSTED,
    }
)
# Not graded, and not the skill's doing: tallied by kind, outside the behavioural rate. A spent
# budget is not a broken evaluator, but it is as far from the skill's behaviour as one.
INFRA_FAILURES = frozenset(
    {
        ShardState.EXECUTOR_FAILED,
        ShardState.GRADER_MALFORMED,
        ShardState.GRADER_DISPATCH_FAILED,
        ShardState.BUDGET_EXHAUSTED,
    }
)
# Forward order of the happy path; a transition may only go to a later rank or to a terminal state.
STATE_RANK = {
    ShardState.QUEUED: 0,
    ShardState.EXECUTING: 1,
    ShardState.EXECUTED: 2,
    ShardState.GRADING: 3,
}


def may_transition(current: ShardState | None, new: ShardState) -> bool:
    """True when ``current -> new`` moves forward (a fresh shard may only become queued)."""
    if current is None:
        return new is ShardState.QUEUED
    if current.terminal:
        return False
    if new.terminal:
        return True
    return STATE_RANK[new] > STATE_RANK[current]


class Verdict(str, Enum):
    """A run's headline verdict (also the run-log VERDICT field)."""

    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"
    BLOCKED = "BLOCKED"

    @property
    def exit_code(self) -> int:
        return int(ExitCode[self.value])


class ExitCode(IntEnum):
    """Process exit codes: the verdict's."""

    PASS = 0
    FAIL = 1
    BLOCKED = 2
    WARN = 3


class SandboxMode(str, Enum):
    """How the executor's tool calls were confined; recorded in every shard result."""

    BWRAP = "bwrap"
    NONE = "none"


class FixtureStage(str, Enum):
    """Git stage of a fixture: ``base`` is committed, ``head`` left dirty."""

    BASE = "base"
    HEAD = "head"
