"""The one exception root of skill-eval, arranged by what failed.

::

    SkillEvalError
    ├── BlockedError                   the run (or one case) must not proceed; exit code 2
    │   ├── BadSkillName               BLOCKED_BAD_SKILL_NAME
    │   ├── NoCorpus                   BLOCKED_NO_CORPUS
    │   ├── DevOnly                    BLOCKED_DEV_ONLY
    │   ├── BadCorpus                  BLOCKED_BAD_CORPUS
    │   ├── NoSandbox                  BLOCKED_NO_SANDBOX (bubblewrap missing, no explicit opt-out)
    │   ├── NoTranscriptCapture        BLOCKED_NO_TRANSCRIPT_CAPTURE
    │   ├── NoIsolation                BLOCKED_NO_ISOLATION (case level: no workspace, never run elsewhere)
    │   ├── BadFixture                 BLOCKED_BAD_FIXTURE (case level)
    │   └── FixtureNeedsGit            BLOCKED_FIXTURE_NEEDS_GIT (case level)
    ├── GuardError                     a feature degrades, the run goes on
    │   ├── NoGit                      GUARD_NO_GIT
    │   └── BadRef                     GUARD_BAD_REF
    ├── InfraError                     the evaluator failed, not the skill; never a behavioural fail
    │   ├── ExecutorFailed             executor-failed
    │   ├── GraderMalformed            grader-malformed
    │   ├── GraderDispatchFailed       grader-dispatch-failed
    │   └── ShardDeadlineExceeded      a shard ran past its wall-clock deadline (the caller maps it
    │                                  to executor-failed or grader-dispatch-failed)
    ├── ModelCallFailed                a model call failed after its retry budget (the caller maps
    │                                  it to executor-failed or grader-dispatch-failed)
    ├── ConfigError                    bad flags, settings or config file; exit code 2
    └── StoreError                     an artifact is missing or cannot be written

Every error prints as ``<STATUS>: <detail>`` and the detail names the file or field at
fault, so the contract's named statuses are never strings assembled ad hoc elsewhere.
"""

from __future__ import annotations

from typing import ClassVar

from schemas.status import ShardState


class SkillEvalError(Exception):
    """Root of every error skill-eval raises on purpose."""

    status: ClassVar[str] = "ERROR"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.status}: {self.detail}"


class BlockedError(SkillEvalError):
    """Fail closed: nothing is run for what this error names."""

    status = "BLOCKED"
    case_level: ClassVar[bool] = False


class BadSkillName(BlockedError):
    status = "BLOCKED_BAD_SKILL_NAME"


class NoCorpus(BlockedError):
    status = "BLOCKED_NO_CORPUS"


class DevOnly(BlockedError):
    status = "BLOCKED_DEV_ONLY"


class BadCorpus(BlockedError):
    """A corpus violates schema v1; ``detail`` is ``<file>: <JSON path>: <what is wrong>``."""

    status = "BLOCKED_BAD_CORPUS"

    def __init__(self, file: str, path: str, problem: str) -> None:
        super().__init__(f"{file}: {path}: {problem}")
        self.file, self.path, self.problem = file, path, problem


class NoSandbox(BlockedError):
    status = "BLOCKED_NO_SANDBOX"


class NoTranscriptCapture(BlockedError):
    status = "BLOCKED_NO_TRANSCRIPT_CAPTURE"


class NoIsolation(BlockedError):
    status = "BLOCKED_NO_ISOLATION"
    case_level = True


class BadFixture(BlockedError):
    status = "BLOCKED_BAD_FIXTURE"
    case_level = True


class FixtureNeedsGit(BlockedError):
    status = "BLOCKED_FIXTURE_NEEDS_GIT"
    case_level = True


class GuardError(SkillEvalError):
    """A guard hit: the feature it protects is skipped, the rest of the run goes on."""

    status = "GUARD"


class NoGit(GuardError):
    status = "GUARD_NO_GIT"


class BadRef(GuardError):
    status = "GUARD_BAD_REF"


class InfraError(SkillEvalError):
    """The evaluator's machinery failed; the shard ends in ``state``, outside the pass rate."""

    state: ClassVar[ShardState]


class ExecutorFailed(InfraError):
    status = ShardState.EXECUTOR_FAILED.value
    state = ShardState.EXECUTOR_FAILED


class GraderMalformed(InfraError):
    status = ShardState.GRADER_MALFORMED.value
    state = ShardState.GRADER_MALFORMED


class GraderDispatchFailed(InfraError):
    status = ShardState.GRADER_DISPATCH_FAILED.value
    state = ShardState.GRADER_DISPATCH_FAILED


class ShardDeadlineExceeded(InfraError):
    """A shard's task ran past its deadline and was interrupted (worker/deadline.py).

    Raised asynchronously inside the task's thread, so it must be constructible without arguments.
    """

    status = "SHARD_DEADLINE_EXCEEDED"
    state = ShardState.EXECUTOR_FAILED

    def __init__(self, detail: str = "the shard ran past its wall-clock deadline and was interrupted") -> None:
        super().__init__(detail)


class ModelCallFailed(SkillEvalError):
    """Retries spent (429s, 5xx, timeouts, connection errors); never a behavioural failure."""

    status = "MODEL_CALL_FAILED"


class ConfigError(SkillEvalError):
    status = "CONFIG_ERROR"


class StoreError(SkillEvalError):
    status = "STORE_ERROR"
