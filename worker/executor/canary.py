"""The transcript-capture canary run before a batch of an external executor.

The grader scores real tool calls, so a runtime that loses tool output would grade every
assertion false by construction. Before the batch, one throwaway case asks the executor
to run a command printing a payload of :data:`CANARY_PAYLOAD_CHARS` characters between
a unique head marker and a unique tail marker. The canary passes only when one captured
*tool result* holds both markers with the whole payload between them: a runtime that keeps
only the first N bytes loses the tail marker, one that elides the middle loses payload.

For a real harness (:func:`probe_harness_capture`) the canary runs once per harness and
model, through the same model proxy and sandbox as a shard.

The markers never appear literally in the command (the shell assembles them from a
variable), so an agent echoing the command back, or a transcript holding only the tool
call, cannot pass by accident.
"""

from __future__ import annotations

import contextlib
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harnesses.base import Harness
from schemas.corpus import EvalCase
from schemas.errors import ExecutorFailed, NoTranscriptCapture
from schemas.manifest import AgentBudget
from schemas.model_config import ModelLimits
from schemas.status import SandboxMode
from schemas.trajectory import ToolResultEvent, Trajectory
from worker.executor.external import ExternalExecutor, external_limits, run_external
from worker.executor.prompt import ExecutorInputs
from worker.models.limiter import Limiter
from worker.sandbox import Sandbox, SandboxLimits, open_sandbox
from worker.workspace import owned_name, remove_tree

CANARY_PAYLOAD_CHARS = 5_000
CANARY_SKILL = "transcript-canary"
CANARY_SKILL_TEXT = """# transcript-canary

Run the shell command the user gives you exactly as written, once, with your shell tool.
Do not change it and do not run anything else. Then reply "done".
"""


@dataclass(frozen=True)
class Canary:
    """One canary probe with its own unique markers."""

    nonce: str

    @classmethod
    def new(cls) -> Canary:
        return cls(nonce=secrets.token_hex(8))

    @property
    def head_marker(self) -> str:
        return f"SKILL-EVAL-CANARY-HEAD-{self.nonce}"

    @property
    def tail_marker(self) -> str:
        return f"SKILL-EVAL-CANARY-TAIL-{self.nonce}"

    @property
    def command(self) -> str:
        return (
            f'n={self.nonce}; echo "SKILL-EVAL-CANARY-HEAD-$n"; '
            f"head -c {CANARY_PAYLOAD_CHARS} /dev/zero | tr '\\0' x; echo; "
            'echo "SKILL-EVAL-CANARY-TAIL-$n"'
        )

    def case(self) -> EvalCase:
        """The throwaway case; it has no assertions, nothing about it is graded."""
        prompt = f"Run this shell command exactly as written, once:\n\n```sh\n{self.command}\n```\n"
        return EvalCase(id=0, prompt=prompt, expected_output="", files=(), assertions=())

    def captured(self, trajectory: Trajectory) -> bool:
        """True when one tool result holds the head marker, the whole payload, then the tail marker."""
        for event in trajectory.events:
            if not isinstance(event, ToolResultEvent):
                continue
            head = event.output.find(self.head_marker)
            tail = event.output.find(self.tail_marker, head + 1) if head >= 0 else -1
            if tail >= 0 and tail - (head + len(self.head_marker)) >= CANARY_PAYLOAD_CHARS:
                return True
        return False


def run_canary(
    executor: ExternalExecutor, sandbox: Sandbox, *, wall_clock_s: float = 300.0, canary: Canary | None = None
) -> Trajectory:
    """Run the canary in ``sandbox`` (a throwaway workspace); return its trajectory when capture works.

    Raises :class:`NoTranscriptCapture` (``BLOCKED_NO_TRANSCRIPT_CAPTURE``) when either marker
    or part of the payload is missing from the captured tool results, or the CLI fails
    before producing a transcript at all: the batch must not start.
    """
    canary = canary or Canary.new()
    try:
        inputs = ExecutorInputs(CANARY_SKILL, CANARY_SKILL_TEXT, {}, canary.case())
        trajectory = run_external(executor, inputs, sandbox=sandbox, wall_clock_s=wall_clock_s)
    except ExecutorFailed as exc:
        raise NoTranscriptCapture(
            f"the canary of {executor.label} produced no transcript ({exc.detail}); grading would be vacuous"
        ) from exc
    if not canary.captured(trajectory):
        raise NoTranscriptCapture(
            f"cannot capture executor tool-call transcripts with {executor.label}: the canary's "
            f"{CANARY_PAYLOAD_CHARS}-character payload with head and tail markers was not in any "
            "captured tool result; grading would be vacuous"
        )
    return trajectory


@contextlib.contextmanager
def canary_workspace(parent: Path | None) -> Iterator[Path]:
    """A fresh empty folder under ``parent`` (made when missing: on a new host no shard has made
    the workspaces folder yet), removed afterwards.

    Named as the workspaces are, with this process's pid, so that when the command is killed
    mid-canary the next worker to start on this host removes it (``reclaim_leftovers``).
    Without a ``parent`` it goes to the system's temporary folder, where nothing reclaims it.
    """
    folder = Path(parent if parent is not None else tempfile.gettempdir()) / owned_name("canary-")
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir(mode=0o700)
    try:
        yield folder
    finally:
        remove_tree(folder)


def probe_transcript_capture(
    executor: ExternalExecutor,
    *,
    mode: SandboxMode,
    limits: SandboxLimits = SandboxLimits(),
    wall_clock_s: float = 300.0,
    parent: Path | None = None,
) -> Trajectory:
    """Run the canary in a fresh empty workspace under ``parent`` (removed afterwards).

    The call to make once before a batch of ``executor``; raises :class:`NoTranscriptCapture`
    as :func:`run_canary` does, or ``NoSandbox`` when ``mode`` cannot run here.
    """
    with canary_workspace(parent) as workspace:
        sandbox = open_sandbox(workspace, mode, external_limits(limits, wall_clock_s=wall_clock_s))
        return run_canary(executor, sandbox, wall_clock_s=wall_clock_s)


def probe_harness_capture(
    harness: Harness,
    model: str,
    model_limits: ModelLimits,
    *,
    mode: SandboxMode,
    limiter: Limiter | None = None,
    wall_clock_s: float = 300.0,
    parent: Path | None = None,
) -> Trajectory:
    """The canary of a real harness for one model: through the same proxy and sandbox a shard uses.

    The canary skill is staged the way the harness loads skills and invoked explicitly; the
    captured tool results must hold both markers and the whole payload, else
    :class:`NoTranscriptCapture`. Raises :class:`NoHarness` when the binary is missing.
    """
    from worker.executor.harness import HarnessShard, harness_limits, run_harness

    canary = Canary.new()
    with canary_workspace(parent) as workspace:
        skill_dir = workspace / "skills" / CANARY_SKILL
        skill_dir.mkdir(parents=True)
        (skill_dir / "SKILL.md").write_text(
            f"---\nname: {CANARY_SKILL}\ndescription: Runs the shell command the user gives, verbatim.\n---\n"
            + CANARY_SKILL_TEXT
        )
        sandbox = open_sandbox(workspace, mode, harness_limits(SandboxLimits(), wall_clock_s=wall_clock_s))
        shard = HarnessShard(
            harness=harness,
            model=model,
            skill=CANARY_SKILL,
            case=canary.case(),
            budget=AgentBudget(wall_clock_s=wall_clock_s, max_turns=8),
            probe=True,
        )
        try:
            trajectory = run_harness(shard, sandbox=sandbox, limits=model_limits, limiter=limiter, tmp_parent=parent)
        except ExecutorFailed as exc:
            raise NoTranscriptCapture(
                f"the canary of {harness.name} ({model}) produced no transcript ({exc.detail}); "
                "grading would be vacuous"
            ) from exc
    if not canary.captured(trajectory):
        raise NoTranscriptCapture(
            f"cannot capture tool-call transcripts with {harness.name} ({model}): the canary's "
            f"{CANARY_PAYLOAD_CHARS}-character payload with head and tail markers was not in any "
            "captured tool result; grading would be vacuous"
        )
    return trajectory
