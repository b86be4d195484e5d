"""External executors: an agent CLI run in the real sandbox, its stream parsed; the capture canary."""

from __future__ import annotations

from pathlib import Path

import pytest

from prompts import load_template
from schemas.corpus import Corpus, EvalCase
from schemas.errors import ConfigError, ExecutorFailed, NoTranscriptCapture
from schemas.status import SandboxMode
from schemas.trajectory import AssistantEvent, EndReason, ToolCallEvent, ToolResultEvent, Trajectory
from tests.executor_support import fake_cli_command, open_test_sandbox
from worker.executor.canary import CANARY_PAYLOAD_CHARS, Canary, probe_transcript_capture, run_canary
from worker.executor.external import ExternalExecutor, external_limits, run_external
from worker.executor.prompt import ExecutorInputs
from worker.sandbox import Sandbox, SandboxLimits

SKILL = "changelog-entry"


@pytest.fixture
def sandbox(example_repo: Path) -> Sandbox:
    return open_test_sandbox(example_repo, external_limits(SandboxLimits(), wall_clock_s=30))


@pytest.fixture
def case(example_repo: Path) -> EvalCase:
    corpus = Corpus.model_validate_json((example_repo / "evals" / f"{SKILL}.evals.json").read_text())
    return corpus.case(1)


def run_cli(sandbox: Sandbox, case: EvalCase, *args: str, wall_clock_s: float | None = None) -> Trajectory:
    return run_external(
        ExternalExecutor(fake_cli_command(*args)),
        ExecutorInputs(
            SKILL,
            skill_text="# changelog-entry\n\nRead `CHANGELOG.md` first.",
            agent_texts={"reviewer.md": "Run grep -n Unreleased CHANGELOG.md."},
            case=case,
        ),
        sandbox=sandbox,
        wall_clock_s=wall_clock_s,
    )


@pytest.mark.parametrize(
    ("option", "command"),
    [
        ("cmd:claude -p --output-format stream-json --verbose", "claude -p --output-format stream-json --verbose"),
        ("cmd: ./agent.sh ", "./agent.sh"),
    ],
)
def test_the_executor_option_names_a_command_line(option: str, command: str) -> None:
    executor = ExternalExecutor.from_option(option)

    assert executor.command == command and executor.label == "cmd:" + command


@pytest.mark.parametrize("option", ["claude -p", "cmd:", "cmd:   ", "exec:claude"])
def test_an_executor_option_without_a_command_is_a_config_error(option: str) -> None:
    with pytest.raises(ConfigError, match="--executor"):
        ExternalExecutor.from_option(option)


def test_the_cli_runs_in_the_sandbox_and_its_stream_becomes_the_trajectory(
    sandbox: Sandbox, case: EvalCase, example_repo: Path
) -> None:
    trajectory = run_cli(sandbox, case, "--junk", "--run", "echo hi > out.txt", "--run", "cat out.txt; pwd")

    calls = [e for e in trajectory.events if isinstance(e, ToolCallEvent)]
    results = [e for e in trajectory.events if isinstance(e, ToolResultEvent)]
    assert [c.arguments for c in calls] == [{"command": "echo hi > out.txt"}, {"command": "cat out.txt; pwd"}]
    assert results[1].output == f"hi\n{sandbox.inner_root}\n"  # really ran, inside the sandbox
    assert (example_repo / "out.txt").read_text() == "hi\n"
    assert trajectory.final_files == {"out.txt": "hi\n"}
    assert trajectory.end_reason is EndReason.COMPLETED
    assert trajectory.model.startswith("cmd:python3 -c")
    assert trajectory.executor == trajectory.model  # the shard view and evidence name the command, not "agent"
    assert (trajectory.usage.prompt_tokens, trajectory.usage.completion_tokens, trajectory.usage.calls) == (200, 40, 3)


def test_the_cli_gets_the_executor_prompt_on_stdin_without_the_grading_criteria(
    sandbox: Sandbox, case: EvalCase
) -> None:
    trajectory = run_cli(sandbox, case, "--echo-prompt")

    prompt = next(e.text for e in trajectory.events if isinstance(e, AssistantEvent))
    assert case.prompt in prompt and "Read `CHANGELOG.md` first." in prompt and "grep -n Unreleased" in prompt
    for secret in (case.expected_output, *case.assertions):
        assert secret not in prompt


def test_an_external_trajectory_records_the_executor_template_hash_like_the_built_in_agent(
    sandbox: Sandbox, case: EvalCase
) -> None:
    trajectory = run_cli(sandbox, case, "--run", "true")

    assert trajectory.template_hashes == {"executor": load_template("executor").sha256}


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("--run", "true", "--exit", "1"), "exited 1"),
        (("--run", "true", "--no-result"), "without a result event"),
    ],
)
def test_a_cli_that_fails_or_crashes_is_executor_failed(
    sandbox: Sandbox, case: EvalCase, args: tuple[str, ...], why: str
) -> None:
    with pytest.raises(ExecutorFailed, match=why):
        run_cli(sandbox, case, *args)


def test_a_command_that_is_not_an_agent_at_all_is_executor_failed(sandbox: Sandbox, case: EvalCase) -> None:
    executor = ExternalExecutor("echo 'no such agent' >&2; exit 127")

    with pytest.raises(ExecutorFailed, match="no such agent"):
        run_external(executor, ExecutorInputs(SKILL, "", {}, case), sandbox=sandbox)


def test_an_agent_out_of_turns_or_out_of_time_is_behaviour_not_failure(sandbox: Sandbox, case: EvalCase) -> None:
    out_of_turns = run_cli(sandbox, case, "--run", "true", "--max-turns")
    out_of_time = run_cli(sandbox, case, "--run", "sleep 30", wall_clock_s=1)

    assert out_of_turns.end_reason is EndReason.MAX_TURNS
    assert out_of_time.end_reason is EndReason.WALL_CLOCK


def test_a_stream_cut_by_the_sandbox_output_cap_is_refused(example_repo: Path, case: EvalCase) -> None:
    small = open_test_sandbox(example_repo, SandboxLimits(output_chars=2_000))

    with pytest.raises(ExecutorFailed, match="output cap"):
        run_cli(small, case, "--run", "head -c 10000 /dev/zero | tr '\\0' z")


def test_the_canary_passes_when_the_whole_payload_is_captured(sandbox: Sandbox) -> None:
    canary = Canary.new()

    trajectory = run_canary(ExternalExecutor(fake_cli_command()), sandbox, canary=canary, wall_clock_s=30)

    assert canary.captured(trajectory)


def test_a_runtime_that_truncates_tool_results_is_blocked_by_the_canary(sandbox: Sandbox) -> None:
    lossy = ExternalExecutor(fake_cli_command("--truncate", "1000"))

    with pytest.raises(NoTranscriptCapture) as caught:
        run_canary(lossy, sandbox, wall_clock_s=30)

    assert str(caught.value).startswith("BLOCKED_NO_TRANSCRIPT_CAPTURE: ")


def test_a_cli_that_crashes_during_the_canary_is_blocked(sandbox: Sandbox) -> None:
    with pytest.raises(NoTranscriptCapture, match="produced no transcript"):
        run_canary(ExternalExecutor(fake_cli_command("--exit", "2")), sandbox, wall_clock_s=30)


def test_the_batch_probe_runs_the_canary_in_a_throwaway_workspace_and_removes_it(tmp_path: Path) -> None:
    honest = ExternalExecutor(fake_cli_command())
    lossy = ExternalExecutor(fake_cli_command("--truncate", "4000"))

    parent = tmp_path / "workspaces"  # not there yet: a host where no shard has run
    passed = probe_transcript_capture(honest, mode=SandboxMode.BWRAP, wall_clock_s=30, parent=parent)
    with pytest.raises(NoTranscriptCapture):
        probe_transcript_capture(lossy, mode=SandboxMode.BWRAP, wall_clock_s=30, parent=parent)

    assert passed.skill == "transcript-canary" and passed.case_id == 0
    assert list(parent.iterdir()) == []


def _trajectory(*events: ToolCallEvent | ToolResultEvent) -> Trajectory:
    return Trajectory(skill="transcript-canary", case_id=0, model="cmd:x", events=list(events))


def test_the_canary_needs_both_markers_and_the_whole_payload_in_one_tool_result() -> None:
    canary = Canary("abc123")
    head, tail, payload = canary.head_marker, canary.tail_marker, "x" * CANARY_PAYLOAD_CHARS
    call = ToolCallEvent(call_id="1", name="Bash", arguments={"command": canary.command})

    def result(output: str) -> ToolResultEvent:
        return ToolResultEvent(call_id="1", output=output)

    assert canary.captured(_trajectory(call, result(f"{head}\n{payload}\n{tail}\n")))
    assert not canary.captured(_trajectory(call, result(f"{head}\n{payload[:900]}")))  # tail lost
    assert not canary.captured(_trajectory(call, result(f"{head}\nxx[... elided ...]xx\n{tail}")))  # middle lost
    assert not canary.captured(_trajectory(call, result(f"{tail}\n{payload}\n{head}")))  # out of order
    assert not canary.captured(_trajectory(call))  # the command alone never carries the markers
    assert head not in canary.command and tail not in canary.command
