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
    │   ├── ModelUnavailable           BLOCKED_MODEL_UNAVAILABLE (a key missing or an endpoint down, before dispatch)
    │   ├── NoHarness                  BLOCKED_NO_HARNESS (an agent harness binary is not installed)
    │   ├── NoIsolation                BLOCKED_NO_ISOLATION (case level: no workspace, never run elsewhere)
    │   ├── BadFixture                 BLOCKED_BAD_FIXTURE (case level)
    │   │   └── SandboxOnly            BLOCKED_BAD_FIXTURE (case level; stops the run: a case's
    │   │                              http_mocks or scaffold_script without the sandbox)
    │   ├── FixtureNeedsGit            BLOCKED_FIXTURE_NEEDS_GIT (case level)
    │   └── BadRepo                    BLOCKED_BAD_REPO (a link out of the repo, an unusable .git)
    ├── GuardError                     a feature degrades, the run goes on
    │   ├── NoGit                      GUARD_NO_GIT
    │   └── BadRef                     GUARD_BAD_REF
    ├── InfraError                     the evaluator failed, not the skill; never a behavioural fail
    │   ├── ExecutorFailed             executor-failed
    │   └── BudgetExhausted            budget-exhausted (the run's cap, or the model's credit, is spent)
    ├── ShareSpent                     the run's cap refused a shard past its share of it: behaviour
    ├── ShardDeadlineExceeded          a shard ran past its wall-clock deadline (ends in its phase's
    │                                  infra failure: executor-failed or grader-dispatch-failed)
    ├── ModelCallFailed                a model call failed after its retry budget (the caller maps
    │   │                              it to executor-failed or grader-dispatch-failed)
    │   └── ContextOverflow            the agent's conversation outgrew the context: behaviour
    ├── ConfigError                    bad flags, settings or config file; exit code 2
    │   └── UnspokenModel              CONFIG_UNSPOKEN_MODEL (a model no given executor can run)
    └── StoreError                     an artifact cannot be read or written
        └── ArtifactMissing            the key holds nothing (not a passing network fault)

Every error prints as ``<STATUS>: <detail>`` and the detail names the file or field at
fault, so the contract's named statuses are never strings assembled ad hoc elsewhere. The
detail names what the repo, the corpus or a recording chose (a file, a key, a model), so it
prints as one line with every control character a visible escape: no name can send the
terminal an escape sequence or start a line of its own.

A shard's terminal state comes from the error's own attributes (``worker.lifecycle``):
a ``BlockedError`` ends it ``blocked`` (``case_level`` says whether the block is the case's
own or the run's; ``stops_run`` whether it turns the run's verdict BLOCKED), an
``InfraError`` ends it in its ``state``, anything else in the phase's infra failure.
"""

from __future__ import annotations

from typing import ClassVar

from schemas.status import ShardState
from schemas.visible import visible, visible_lines


class SkillEvalError(Exception):
    """Root of every error skill-eval raises on purpose."""

    status: ClassVar[str] = "ERROR"
    lines_kept: ClassVar[bool] = False
    """The detail's own line breaks are printed as such (a log tail the evaluator appends), not escaped."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.status}: {(visible_lines if self.lines_kept else visible)(self.detail)}"


class BlockedError(SkillEvalError):
    """Fail closed: nothing is run for what this error names."""

    status = "BLOCKED"
    case_level: ClassVar[bool] = False
    """Raised for one case (its workspace, its fixture) rather than for the whole run."""
    stops_run: ClassVar[bool] = False
    """A shard blocked by this stops the run: its verdict is BLOCKED, not WARN."""


class BadSkillName(BlockedError):
    status = "BLOCKED_BAD_SKILL_NAME"


class NoCorpus(BlockedError):
    status = "BLOCKED_NO_CORPUS"


class DevOnly(BlockedError):
    status = "BLOCKED_DEV_ONLY"


class BadCorpus(BlockedError):
    """A corpus violates schema v1; ``detail`` is ``<file>: <JSON path>: <what is wrong>``.

    ``also`` holds the file's further violations, so one pass shows every one of them: the
    error prints one ``BLOCKED_BAD_CORPUS`` line per violation, in document order.
    """

    status = "BLOCKED_BAD_CORPUS"

    def __init__(self, file: str, path: str, problem: str, also: tuple[BadCorpus, ...] = ()) -> None:
        super().__init__(f"{file}: {path}: {problem}")
        self.file, self.path, self.problem = file, path, problem
        self.also = also

    def __str__(self) -> str:
        return "\n".join(f"{self.status}: {visible(e.detail)}" for e in (self, *self.also))


class NoSandbox(BlockedError):
    status = "BLOCKED_NO_SANDBOX"
    stops_run = True  # a worker refusing to run unconfined


class NoTranscriptCapture(BlockedError):
    status = "BLOCKED_NO_TRANSCRIPT_CAPTURE"


class ModelUnavailable(BlockedError):
    """A run's model cannot be called (no key, endpoint refusing): found before any shard is sent."""

    status = "BLOCKED_MODEL_UNAVAILABLE"


class NoHarness(BlockedError):
    """The named harness's binary is missing; ``detail`` is ``<name>: <how to install>``."""

    status = "BLOCKED_NO_HARNESS"


class NoIsolation(BlockedError):
    status = "BLOCKED_NO_ISOLATION"
    case_level = True
    stops_run = True  # never run a case outside its own workspace, and never call the run green


class BadFixture(BlockedError):
    status = "BLOCKED_BAD_FIXTURE"
    case_level = True


class SandboxOnly(BadFixture):
    """A case whose terms run only inside the bwrap sandbox (``http_mocks``: the sandbox's lack of
    network is what makes them the only answers; ``scaffold_script``: never run on the host), asked
    to run without it. Refused before the run starts when the run itself chose ``--sandbox none``;
    a worker without the sandbox that meets one anyway blocks the case and stops the run."""

    stops_run = True  # the user asked for an unsafe combination: BLOCKED, never a WARN


class FixtureNeedsGit(BlockedError):
    status = "BLOCKED_FIXTURE_NEEDS_GIT"
    case_level = True
    stops_run = True  # a base fixture without git halts the skill


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


class BudgetExhausted(InfraError):
    """No new model call may start for this run (its cap is reached) or this model (out of credit)."""

    status = ShardState.BUDGET_EXHAUSTED.value
    state = ShardState.BUDGET_EXHAUSTED


class ShareSpent(SkillEvalError):
    """The run's cap refused an executor call of a shard that had spent past its share of the cap.

    Behaviour, not infra: the shard's own spending took it there (engine/budget.py), so the
    executor ends the trajectory ``budget-share`` and it is graded on what the agent did. A
    shard within its share that the cap refuses gets :class:`BudgetExhausted` instead."""

    status = "BUDGET_SHARE_SPENT"


class ShardDeadlineExceeded(SkillEvalError):
    """A shard's task ran past its deadline and was interrupted (worker/deadline.py).

    Raised asynchronously inside the task's thread, so it must be constructible without arguments.
    Not an ``InfraError`` with a fixed state: it ends the shard in the infra failure of the phase
    it interrupted (``executor-failed`` while executing, ``grader-dispatch-failed`` while grading).
    """

    status = "SHARD_DEADLINE_EXCEEDED"

    def __init__(self, detail: str = "the shard ran past its wall-clock deadline and was interrupted") -> None:
        super().__init__(detail)


class ModelCallFailed(SkillEvalError):
    """Retries spent (429s, 5xx, timeouts, connection errors); never a behavioural failure."""

    status = "MODEL_CALL_FAILED"


class ContextOverflow(ModelCallFailed):
    """The provider refused the agent's own conversation as too long for the model's context.

    Behaviour, not infra: the agent's volume caused it (the product caps every tool result), so
    the executor ends the trajectory and it is graded on what the agent did."""

    status = "CONTEXT_OVERFLOW"


class ConfigError(SkillEvalError):
    status = "CONFIG_ERROR"


class UnspokenModel(ConfigError):
    """A model no given ``--executor`` can run, or an executor given no model it can run; the
    detail names both (refused by ``validate``, ``--dry-run`` and ``run`` before anything runs)."""

    status = "CONFIG_UNSPOKEN_MODEL"


class StoreError(SkillEvalError):
    status = "STORE_ERROR"


class ArtifactMissing(StoreError):
    """The store answered that the key holds nothing: retrying will not make it appear."""


class BadRepo(BlockedError):
    """The repo itself is unsafe to read (a link out of it, a git dir that cannot be made safe).

    ``detail`` is ``<path>: <why>``; case level when a worker finds it in a workspace.
    """

    status = "BLOCKED_BAD_REPO"
    case_level = True

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


def blocked_error(status: str, detail: str) -> BlockedError:
    """The named error of ``status`` (a ``BLOCKED_*`` status sent back by a worker) with ``detail``;
    a plain :class:`BlockedError` for a status this version does not know."""
    pending: list[type[BlockedError]] = [BlockedError]
    while pending:
        cls = pending.pop()
        if cls.status == status:
            try:
                return cls(detail)
            except TypeError:  # a named error built from more than a detail (BadCorpus): not a host's
                break
        pending.extend(cls.__subclasses__())
    return BlockedError(f"{status}: {detail}")
