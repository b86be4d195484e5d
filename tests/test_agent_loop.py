"""The built-in executor loop, over real HTTP to the offline model server, in a real sandbox and workspace."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.snapshot import snapshot_repo
from engine.store import LocalStore
from schemas.corpus import Corpus, EvalCase
from schemas.errors import ExecutorFailed
from schemas.status import SandboxMode, ShardState
from schemas.trajectory import AssistantEvent, EndReason, ToolCallEvent, ToolResultEvent, Trajectory
from testkit.offline_server import OfflineModelServer
from tests.executor_support import open_test_sandbox
from tests.model_support import server_fixtures
from worker.executor import agent as agent_module
from worker.executor.agent import AgentBudget, run_agent
from worker.executor.prompt import ExecutorInputs, render_executor_prompt
from worker.models.client import GatedModelClient
from worker.sandbox import Sandbox, SandboxLimits
from worker.workspace import Workspace, materialize_workspace

# litellm imports parts of the openai SDK lazily, on the first call; pydantic warns about one
# of its TypedDicts then. Not ours to fix (pyproject's filter list belongs to the lead).
pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly:UserWarning")

MODEL = "openai/scripted-exec"
SKILL = "changelog-entry"
NEW_ENTRY = "## Unreleased\n\n### Fixed\n\n- Fixed a crash when the name is empty."


def rule(*replies: dict[str, Any]) -> dict[str, Any]:
    return {"rules": [{"name": "executor", "model": "scripted-exec", "tools": True, "replies": list(replies)}]}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


CHANGELOG_SCRIPT = rule(
    {"text": "I will read the changelog first.", "tool_calls": [call("read_file", path="CHANGELOG.md")]},
    {"tool_calls": [call("edit_file", path="CHANGELOG.md", old="## Unreleased", new=NEW_ENTRY)]},
    {"tool_calls": [call("shell", command="grep -n Unreleased CHANGELOG.md; echo '- also from shell' >> NOTES.md")]},
    {"text": "Added the entry under ### Fixed."},
)


server, scripted, client = server_fixtures()


@pytest.fixture
def corpus(example_repo: Path) -> Corpus:
    return Corpus.model_validate_json((example_repo / "evals" / f"{SKILL}.evals.json").read_text())


@pytest.fixture
def workspace(example_repo: Path, corpus: Corpus, tmp_path: Path) -> Iterator[Workspace]:
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(example_repo, store)
    with materialize_workspace(
        store, key, skill=SKILL, case=corpus.case(1), parent=tmp_path / "ws", cache_dir=tmp_path / "cache"
    ) as ws:
        yield ws


@pytest.fixture
def sandbox(workspace: Workspace) -> Sandbox:
    return open_test_sandbox(workspace.path, SandboxLimits(timeout_s=20))


def run(
    client: GatedModelClient,
    sandbox: Sandbox,
    case: EvalCase,
    example_repo: Path,
    budget: AgentBudget | None = None,
) -> Trajectory:
    skill_dir = example_repo / "skills" / SKILL
    return run_agent(
        client,
        MODEL,
        ExecutorInputs(
            SKILL,
            skill_text=(skill_dir / "SKILL.md").read_text(),
            agent_texts={p.name: p.read_text() for p in (skill_dir / "agents").glob("*.md")},
            case=case,
        ),
        sandbox=sandbox,
        budget=budget,
    )


def test_a_scripted_session_edits_the_workspace_and_records_every_step(
    client: GatedModelClient,
    scripted: OfflineModelServer,
    sandbox: Sandbox,
    workspace: Workspace,
    corpus: Corpus,
    example_repo: Path,
) -> None:
    scripted.set_scenario(CHANGELOG_SCRIPT)

    trajectory = run(client, sandbox, corpus.case(1), example_repo)

    # The workspace really changed, the live checkout did not.
    changelog = (workspace.path / "CHANGELOG.md").read_text()
    assert "### Fixed\n\n- Fixed a crash when the name is empty." in changelog
    assert "### Fixed" not in (example_repo / "CHANGELOG.md").read_text()
    # Every step is recorded, in order, with results paired to calls.
    calls = [e for e in trajectory.events if isinstance(e, ToolCallEvent)]
    results = [e for e in trajectory.events if isinstance(e, ToolResultEvent)]
    assert [c.name for c in calls] == ["read_file", "edit_file", "shell"]
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert [r.exit_code for r in results] == [0, 0, 0]
    assert "## Unreleased" in results[0].output
    assert "3:## Unreleased" in results[2].output
    assert isinstance(trajectory.events[0], AssistantEvent)
    assert trajectory.events[-1] == AssistantEvent(text="Added the entry under ### Fixed.", ts=trajectory.events[-1].ts)
    assert trajectory.end_reason is EndReason.COMPLETED and trajectory.sandbox is SandboxMode.BWRAP
    assert trajectory.usage.calls == 4 and trajectory.usage.total_tokens > 0
    assert trajectory.finished_at is not None and trajectory.finished_at >= trajectory.started_at
    # Final files: the edited file and the one the shell created, nothing else.
    assert trajectory.final_files == {"CHANGELOG.md": changelog, "NOTES.md": "- also from shell\n"}
    rendered = trajectory.render()
    assert '[tool_call] read_file({"path": "CHANGELOG.md"})' in rendered
    assert "[tool_result] shell exit=0\n" in rendered


def test_each_tool_result_goes_back_to_the_model_paired_with_its_call(
    client: GatedModelClient, scripted: OfflineModelServer, sandbox: Sandbox, corpus: Corpus, example_repo: Path
) -> None:
    scripted.set_scenario(CHANGELOG_SCRIPT)

    run(client, sandbox, corpus.case(1), example_repo)

    second = scripted.requests()[1]["messages"]
    assistant, tool = second[-2], second[-1]
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"][0]["function"]["name"] == "read_file"
    assert tool["role"] == "tool" and tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert "## Unreleased" in tool["content"]


def test_the_executor_prompt_carries_the_skill_and_task_but_never_the_grading_criteria(
    client: GatedModelClient, scripted: OfflineModelServer, sandbox: Sandbox, corpus: Corpus, example_repo: Path
) -> None:
    scripted.set_scenario(CHANGELOG_SCRIPT)
    case = corpus.case(1)

    run(client, sandbox, case, example_repo)

    recorded = httpx.get(f"http://127.0.0.1:{scripted.port}/_control/requests", timeout=10).json()
    bodies = json.dumps(recorded)
    first_prompt = recorded[0]["messages"][0]["content"]
    assert case.prompt in first_prompt
    assert "Read `CHANGELOG.md` first." in first_prompt  # SKILL.md
    assert 'grep -n "Unreleased" CHANGELOG.md' in first_prompt  # agents/reviewer.md
    assert "`CHANGELOG.md`" in first_prompt  # the case's files
    assert "never open" in first_prompt.lower() and "evals/" in first_prompt
    for secret in (case.expected_output, *case.assertions):
        assert json.dumps(secret)[1:-1] not in bodies


def test_running_out_of_turns_ends_the_trajectory_as_behaviour(
    client: GatedModelClient, scripted: OfflineModelServer, sandbox: Sandbox, corpus: Corpus, example_repo: Path
) -> None:
    scripted.set_scenario(rule({"tool_calls": [call("shell", command="echo again")]}))

    trajectory = run(client, sandbox, corpus.case(1), example_repo, AgentBudget(max_turns=3))

    assert trajectory.end_reason is EndReason.MAX_TURNS
    assert len(scripted.requests()) == 3
    assert sum(isinstance(e, ToolResultEvent) for e in trajectory.events) == 3
    assert trajectory.render().endswith("[assistant] (run ended: max-turns)\n")


def test_running_out_of_tokens_ends_the_trajectory_as_behaviour(
    client: GatedModelClient, scripted: OfflineModelServer, sandbox: Sandbox, corpus: Corpus, example_repo: Path
) -> None:
    scripted.set_scenario(rule({"tool_calls": [call("shell", command="echo again")]}))

    trajectory = run(client, sandbox, corpus.case(1), example_repo, AgentBudget(max_tokens=10))

    assert trajectory.end_reason is EndReason.MAX_TOKENS
    assert len(scripted.requests()) == 1


def test_the_wall_clock_cuts_a_long_command_and_ends_the_trajectory(
    client: GatedModelClient, scripted: OfflineModelServer, sandbox: Sandbox, corpus: Corpus, example_repo: Path
) -> None:
    scripted.set_scenario(rule({"tool_calls": [call("shell", command="sleep 30")]}))
    started = time.monotonic()

    trajectory = run(client, sandbox, corpus.case(1), example_repo, AgentBudget(wall_clock_s=2.0))

    assert time.monotonic() - started < 10
    assert trajectory.end_reason is EndReason.WALL_CLOCK
    (result,) = [e for e in trajectory.events if isinstance(e, ToolResultEvent)]
    assert result.limit == "timeout"


def test_time_spent_waiting_on_a_rate_limit_is_not_the_agents_wall_clock(
    client: GatedModelClient, scripted: OfflineModelServer, sandbox: Sandbox, corpus: Corpus, example_repo: Path
) -> None:
    # The first answer is a 429 with a 1.5 s cool-down, longer than the whole wall clock: the
    # fleet's contention, which used to end the agent WALL_CLOCK (behaviour) before its first tool.
    scripted.set_scenario(
        rule(
            {"tool_calls": [call("shell", command="echo hi")], "status": 429, "retry_after": 1.5, "times": 1},
            {"text": "Done."},
        )
    )

    trajectory = run(client, sandbox, corpus.case(1), example_repo, AgentBudget(wall_clock_s=1.0))

    assert trajectory.end_reason is EndReason.COMPLETED
    assert [e.output.strip() for e in trajectory.events if isinstance(e, ToolResultEvent)] == ["hi"]
    assert trajectory.waited_s >= 1.4
    assert scripted.stats()["rate_limited"] == 1


def test_no_more_than_the_allowance_of_waiting_is_left_out_of_the_wall_clock(
    client: GatedModelClient,
    scripted: OfflineModelServer,
    sandbox: Sandbox,
    corpus: Corpus,
    example_repo: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(agent_module, "FLEET_WAIT_ALLOWANCE_S", 0.2)
    scripted.set_scenario(
        rule(
            {"tool_calls": [call("shell", command="echo hi")], "status": 429, "retry_after": 1.5, "times": 1},
            {"text": "Done."},
        )
    )

    trajectory = run(client, sandbox, corpus.case(1), example_repo, AgentBudget(wall_clock_s=1.0))

    assert trajectory.end_reason is EndReason.WALL_CLOCK  # 1.5 s waited, 0.2 s excused: over the 1 s
    assert trajectory.waited_s >= 1.4  # what it waited is recorded in full


def test_bad_tool_calls_are_answered_with_errors_and_the_loop_goes_on(
    client: GatedModelClient, scripted: OfflineModelServer, sandbox: Sandbox, corpus: Corpus, example_repo: Path
) -> None:
    scripted.set_scenario(
        rule(
            {"tool_calls": [call("delete_repo", path="."), {"name": "shell", "arguments_raw": "{broken"}]},
            {"text": "Sorry, done."},
        )
    )

    trajectory = run(client, sandbox, corpus.case(1), example_repo)

    results = [e for e in trajectory.events if isinstance(e, ToolResultEvent)]
    assert [r.output.split(":")[0] for r in results] == ["error", "error"]
    assert "unknown tool" in results[0].output and "not valid JSON" in results[1].output
    assert trajectory.end_reason is EndReason.COMPLETED
    echoed = scripted.requests()[1]["messages"][1]["tool_calls"][1]["function"]["arguments"]
    assert echoed == "{broken"  # what the model sent goes back to it unchanged


def test_a_model_failing_past_its_retry_budget_is_executor_failed_not_behaviour(
    client: GatedModelClient, scripted: OfflineModelServer, sandbox: Sandbox, corpus: Corpus, example_repo: Path
) -> None:
    scripted.set_scenario(rule({"status": 503}))

    with pytest.raises(ExecutorFailed) as caught:
        run(client, sandbox, corpus.case(1), example_repo)

    assert caught.value.state is ShardState.EXECUTOR_FAILED
    assert MODEL in caught.value.detail
    assert len(scripted.requests()) == 2  # the client's whole retry budget was spent


def test_braces_and_placeholder_tokens_in_a_skill_are_inserted_literally(corpus: Corpus) -> None:
    case = corpus.case(1)
    tricky = "Use {{case_prompt}} and ${HOME} and {x} verbatim."

    rendered = render_executor_prompt(ExecutorInputs(SKILL, tricky, {}, case), workspace="/workspace")

    assert tricky in rendered.text
    assert rendered.text.count(case.prompt) == 1
    assert "{{" not in rendered.text.replace(tricky, "")  # every template token was filled
    assert len(rendered.template_sha256) == 64


class _CountingSandbox:
    """The real sandbox, counting the commands it is asked to run."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner, self.commands = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def run(self, command: str, **kw: Any) -> Any:
        self.commands += 1
        return self.inner.run(command, **kw)


def test_an_answer_without_tool_calls_lists_no_final_files_and_starts_no_sandbox(
    client: GatedModelClient, scripted: OfflineModelServer, sandbox: Sandbox, corpus: Corpus, example_repo: Path
) -> None:
    scripted.set_scenario(rule({"text": "Nothing to change."}))
    counting = _CountingSandbox(sandbox)

    trajectory = run(client, counting, corpus.case(1), example_repo)  # type: ignore[arg-type]

    assert trajectory.end_reason is EndReason.COMPLETED and trajectory.final_files == {}
    assert counting.commands == 0  # nothing ran in the workspace, so no file can have changed

    scripted.set_scenario(rule({"tool_calls": [call("shell", command="echo hi > NEW.md")]}, {"text": "Done."}))
    trajectory = run(client, counting, corpus.case(1), example_repo)  # type: ignore[arg-type]
    assert trajectory.final_files == {"NEW.md": "hi\n"}  # one tool call: the listing runs again
