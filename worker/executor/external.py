"""External executors: an agent CLI run inside the shard's sandbox, its event stream parsed.

``--executor cmd:'<command line>'`` names the CLI. The command runs with ``bash -c`` in
the workspace, inside the same sandbox as the built-in executor's tools, and receives
the full executor prompt (the same ``prompts/executor.md`` rendering: skill, agents, case
prompt, file list; never the assertions) **on stdin**. It must write a JSON-lines event
stream in Claude Code's stream-json format to stdout, e.g.::

    --executor "cmd:claude -p --output-format stream-json --verbose"

stdout and stderr arrive combined; the parser skips lines that are not events. The
sandbox must be opened with :func:`external_limits` so the stream is never cut in the
middle (a cut stream is refused rather than graded with a hole in it).

Failure semantics: the CLI exiting non-zero, crashing before its
``result`` line, or hitting a resource limit other than the wall clock is
``executor-failed`` (infra); running out of wall clock or turns, or filling the workspace
past its quota (watched while the CLI runs, measured after it), is behaviour.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from harnesses.stream_json import read_stream_json
from schemas.constants import CMD_EXECUTOR_PREFIX
from schemas.errors import ConfigError, ExecutorFailed
from schemas.trajectory import AssistantEvent, EndReason, ToolCallEvent, Trajectory
from worker.executor.final_files import collect_final_files
from worker.executor.prompt import ExecutorInputs, render_executor_prompt
from worker.sandbox import Sandbox, SandboxLimits
from worker.workspace_quota import WORKSPACE_LIMIT, quota_breach

OPTION_PREFIX = CMD_EXECUTOR_PREFIX
# An agent's whole stream must fit; the sandbox's default cap is sized for one tool's output.
EXTERNAL_OUTPUT_CHARS = 50_000_000
# Tools that write the file named in their arguments (Claude Code's and the built-in ones).
_WRITING_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit", "write_file", "edit_file"})
_FILE_ARGUMENT_KEYS = ("file_path", "path", "notebook_path")


@dataclass(frozen=True)
class ExternalExecutor:
    """An agent CLI command line, as given by ``--executor cmd:'<command line>'``."""

    command: str

    @property
    def label(self) -> str:
        """How the trajectory names this executor in place of a model name."""
        return OPTION_PREFIX + self.command

    @classmethod
    def from_option(cls, value: str) -> ExternalExecutor:
        """Parse the ``--executor`` value; raise ConfigError unless it is ``cmd:<non-empty command>``."""
        if not value.startswith(OPTION_PREFIX) or not value[len(OPTION_PREFIX) :].strip():
            raise ConfigError(f"--executor: expected cmd:'<command line>', got {value!r}")
        return cls(command=value[len(OPTION_PREFIX) :].strip())


def external_limits(limits: SandboxLimits, *, wall_clock_s: float) -> SandboxLimits:
    """Sandbox limits for an external executor: the whole stream kept, the shard's wall clock as timeout."""
    return replace(limits, output_chars=EXTERNAL_OUTPUT_CHARS, timeout_s=wall_clock_s, cpu_s=int(wall_clock_s))


def tail_of(text: str, chars: int = 600) -> str:
    """The end of a CLI's output, for an error that must say what it printed last."""
    return text[-chars:].strip() or "(no output)"


def run_external(
    executor: ExternalExecutor,
    inputs: ExecutorInputs,
    *,
    sandbox: Sandbox,
    wall_clock_s: float | None = None,
) -> Trajectory:
    """Run the external agent CLI for one case and return its trajectory.

    Raises :class:`ExecutorFailed` when the CLI fails as a program (see the module doc).
    """
    started_at = datetime.now(UTC)
    since_epoch = time.time()
    prompt = render_executor_prompt(inputs, workspace=sandbox.inner_root)
    result = sandbox.run(executor.command, timeout_s=wall_clock_s, stdin=prompt.text)
    where = f"external executor {executor.command!r}"
    # Measured before the final files are read; a breach is the agent's doing, whatever the CLI did after.
    over = quota_breach(sandbox.workspace, sandbox.limits, stopped=result.limit == WORKSPACE_LIMIT)
    if result.truncated and over is None:
        raise ExecutorFailed(f"{where}: its event stream was cut by the sandbox's output cap")
    parsed = read_stream_json(result.output.splitlines())
    end_reason = parsed.end_reason
    if over is not None:
        end_reason = EndReason.WORKSPACE_QUOTA
        parsed.events.append(AssistantEvent(text=f"(run ended by the product: {over})"))
    elif result.limit == "timeout":
        end_reason = EndReason.WALL_CLOCK
    elif result.limit:
        raise ExecutorFailed(f"{where}: stopped by the sandbox's {result.limit} limit: {tail_of(result.output)}")
    elif end_reason is not EndReason.MAX_TURNS and (result.exit_code != 0 or not parsed.saw_result):
        what = f"exited {result.exit_code}" if result.exit_code != 0 else "ended without a result event"
        raise ExecutorFailed(f"{where}: {what}: {tail_of(result.output)}")
    wrote = [
        str(event.arguments[key])
        for event in parsed.events
        if isinstance(event, ToolCallEvent) and event.name in _WRITING_TOOLS
        for key in _FILE_ARGUMENT_KEYS
        if isinstance(event.arguments.get(key), str)
    ]
    return Trajectory(
        **inputs.named(executor.label),
        executor=executor.label,
        events=parsed.events,
        end_reason=end_reason,
        sandbox=sandbox.mode,
        usage=parsed.usage,
        final_files=collect_final_files(sandbox, since_epoch=since_epoch, wrote=wrote),
        started_at=started_at,
        finished_at=datetime.now(UTC),
        template_hashes={"executor": prompt.template_sha256},  # the same rendering the built-in agent records
    )
