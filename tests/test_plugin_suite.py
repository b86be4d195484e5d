"""A Claude Code plugin eval suite run as written: the fixture plugin's cases, executed by the
built-in agent against the offline model server, graded with plugin eval's grader semantics, and
scored as plugin eval defines it (weighted share of graders per run, mean per case, mean per suite)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.snapshot import snapshot_repo
from engine.store import LocalStore
from harnesses.base import MOCK_FILE, MOCK_SERVER, HarnessRequest, Invoke
from harnesses.claude_code import ClaudeCode
from harnesses.registry import HARNESSES
from producer.corpus.repo import Repo
from producer.plan.case_terms import HONOURS, check_case_terms
from reducer.plugin_score import below_threshold, scores_from_sums
from reducer.scoring import composite
from reducer.threshold import case_threshold_label, with_verdicts
from schemas.corpus import Corpus, EvalCase
from schemas.errors import BadCorpus
from schemas.mocks import answer
from schemas.report import CaseRun, PluginSuiteScore, SkillResult
from schemas.shard import RunPlan, SkillBundle
from schemas.status import ShardState
from schemas.trajectory import ToolCallEvent, ToolResultEvent, Trajectory
from testkit.offline_server import OfflineModelServer
from tests.executor_support import open_test_sandbox
from tests.grading_support import JUDGE
from tests.model_support import server_fixtures
from worker.executor.agent import run_agent
from worker.executor.mock_calls import stage_mocks
from worker.executor.prompt import ExecutorInputs
from worker.grading.judge import grade_trajectory
from worker.models.client import GatedModelClient
from worker.sandbox import SandboxLimits
from worker.workspace import materialize_workspace

pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly:UserWarning")

FIXTURE = Path(__file__).parent / "fixtures" / "plugin-weather"
SUITE = "evals/*/ [plugin suite: forecast]"
MODEL = "openai/scripted-exec"
JUDGE_RULES = [{"assertion_contains": "forecast for Paris", "transcript_regex": r"^\[assistant\].*sunny"}]

server, scripted, client = server_fixtures()


def suite_scores(case_ids: list[int], runs: list[CaseRun]) -> list[PluginSuiteScore]:
    """The suite's scores from graded rows, summed as the reduce sums them."""
    sums: dict[tuple[int, str], list[float]] = {}
    for r in runs:
        if r.state is ShardState.GRADED and r.composite is not None:
            cell = sums.setdefault((r.case_id, r.model), [0.0, 0.0])
            cell[0] += r.composite
            cell[1] += 1
    return scores_from_sums(case_ids, sorted({r.model for r in runs}), sums)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def scenario(*replies: dict[str, Any]) -> dict[str, Any]:
    executor = {"name": "executor", "model": "scripted-exec", "tools": True, "replies": list(replies)}
    return {"rules": [executor, {"name": "judge", "judge": True}], "judge": JUDGE_RULES}


SUNNY_DAY = scenario(
    {"tool_calls": [call("mcp__weather__get_forecast", city="Paris", day="tomorrow")]},
    # The mock's expect guard refuses Berlin: an error answer, and a finding.
    {"tool_calls": [call("mcp__weather__get_forecast", city="Berlin")]},
    {"tool_calls": [call("write_file", path="forecast.txt", content="Paris: sunny\n")]},
    {"tool_calls": [call("shell", command="cat forecast.txt")]},
    # The real server is repo code: in the sandbox it reaches no network, and the mocks are not there.
    {"tool_calls": [call("shell", command="ls evals/mocks; python3 server/weather_server.py")]},
    # Edit is not among the case's allowed tools: refused, yet recorded (and the f-no-edit grader sees it).
    {"tool_calls": [call("edit_file", path="forecast.txt", old="sunny", new="rainy")]},
    {"text": "Tomorrow in Paris it will be sunny."},
)
OSLO = scenario({"text": "It is sunny in Oslo today, no rain."})


@pytest.fixture
def plugin_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "plugin-weather"
    shutil.copytree(FIXTURE, repo)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True)
    return repo


def execute(client: GatedModelClient, repo: Path, bundle: SkillBundle, case_id: int, tmp_path: Path) -> Trajectory:
    store = LocalStore(tmp_path / f"store-{case_id}")
    key = snapshot_repo(repo, store)
    case = bundle.corpus.case(case_id)
    with materialize_workspace(
        store,
        key,
        skill="forecast",
        case=case,
        parent=tmp_path / f"ws-{case_id}",
        cache_dir=tmp_path / "cache",
        graded_paths=bundle.graded_paths,
    ) as ws:
        sandbox = open_test_sandbox(ws.path, SandboxLimits(timeout_s=20))
        return run_agent(client, MODEL, ExecutorInputs("forecast", None, {}, case), sandbox=sandbox)


def test_the_suite_is_read_with_every_grader_kind_and_its_limits(plugin_repo: Path) -> None:
    corpus = Repo(plugin_repo).load(SUITE).corpus
    oslo, sunny = corpus.evals  # case folders in sorted order
    assert [(c.id, c.name) for c in corpus.evals] == [(1, "oslo-rain"), (2, "sunny-day")]  # reports name them
    kinds = [a if isinstance(a, str) else a.kind for a in sunny.assertions]
    assert kinds == [
        *("text_match", "text_match", "tool_count", "tool_order", "file_glob", "tool_count", "judged", "tool_count")
    ]
    [weather] = sunny.mocks
    [tool] = weather.tools
    assert (weather.name, tool.name, tool.expect) == ("weather", "get_forecast", {"city": "^(Paris|Oslo)$"})
    assert tool.input_schema["required"] == ["city"]
    assert (sunny.max_turns, sunny.allowed_tools) == (8, ("Bash", "Read", "Write", "mcp__weather__get_forecast"))
    assert (sunny.timeout_s, oslo.timeout_s) == (300, None)
    assert [a if isinstance(a, str) else a.kind for a in oslo.assertions] == ["text_match", "tool_count", "file_glob"]


def test_scores_match_the_hand_computed_ones(
    client: GatedModelClient, scripted: OfflineModelServer, plugin_repo: Path, tmp_path: Path
) -> None:
    bundle = Repo(plugin_repo).load(SUITE)
    corpus = bundle.corpus
    assert bundle.graded_paths == ("evals/oslo-rain", "evals/sunny-day", "evals/mocks")
    runs = []
    for case_id, script in ((2, SUNNY_DAY), (1, OSLO)):
        scripted.set_scenario(script)
        trajectory = execute(client, plugin_repo, bundle, case_id, tmp_path)
        grade = grade_trajectory(client, [JUDGE], corpus.case(case_id).assertions, trajectory, skill="forecast")
        assert grade.state is ShardState.GRADED, grade.error
        runs.append((trajectory, grade.verdicts))

    (sunny, sunny_verdicts), (_oslo, oslo_verdicts) = runs  # executed sunny-day (case 2) first
    # The refused Edit reached nothing: the file keeps what was written.
    assert sunny.final_files["forecast.txt"] == "Paris: sunny\n"
    assert sunny.final_files["server-ran.txt"]  # the agent ran the repo's server itself: in the sandbox only
    results = [e for e in sunny.events if isinstance(e, ToolResultEvent)]
    assert [e.name for e in sunny.events if isinstance(e, ToolCallEvent)] == [
        *("mcp__weather__get_forecast", "mcp__weather__get_forecast", "write_file", "shell", "shell", "edit_file")
    ]
    # The mock answered from its script, templated; the guard's refusal is an error and a finding.
    assert (results[0].output, results[0].exit_code) == ("Paris tomorrow: sunny, 24 °C.", 0)
    assert results[1].exit_code == 1 and results[1].output.startswith("error: unexpected input: city")
    assert sunny.mock_findings == [
        "mcp__weather__get_forecast: unexpected input city='Berlin' (expected /^(Paris|Oslo)$/)"
    ]
    # The real server: no mocks folder in the workspace, no network.
    assert results[4].exit_code != 0 and "No such file or directory" in results[4].output
    assert "URLError" in results[4].output
    assert "not available" in results[5].output
    # The mocked tool was offered with its declared schema, beside the allowed built-in tools only.
    offered = {t["function"]["name"]: t["function"] for t in scripted.requests()[0]["tools"]}
    assert sorted(offered) == ["mcp__weather__get_forecast", "read_file", "shell", "write_file"]
    assert offered["mcp__weather__get_forecast"]["parameters"]["required"] == ["city"]
    # Case 2: reply, file, shell once, order (w2), *.txt exist; Edit was called (fails); llm (w3); mock call.
    assert [v.passed for v in sunny_verdicts] == [True, True, True, True, True, False, True, True]
    assert [v.weight for v in sunny_verdicts] == [1, 1, 1, 2, 1, 1, 3, 1]
    assert composite([v.passed for v in sunny_verdicts], [v.weight for v in sunny_verdicts]) == pytest.approx(10 / 11)
    # Case 2: "sunny" is in the trace (fails), no Read (fails), no reports/**/*.md (passes).
    assert [v.passed for v in oslo_verdicts] == [False, False, True]
    assert composite([v.passed for v in oslo_verdicts], [v.weight for v in oslo_verdicts]) == pytest.approx(1 / 3)

    case_runs = [
        CaseRun(
            shard_id=f"s{i}",
            case_id=i,
            model=MODEL,
            epoch=1,
            state=ShardState.GRADED,
            verdicts=v,
            composite=composite([x.passed for x in v], [x.weight for x in v]),
        )
        for i, v in ((2, sunny_verdicts), (1, oslo_verdicts))
    ]
    [suite] = suite_scores([1, 2], case_runs)
    assert [c.score for c in suite.cases] == [pytest.approx(1 / 3), pytest.approx(10 / 11)]
    assert suite.score == pytest.approx((10 / 11 + 1 / 3) / 2)


def _suite(scores: list[float]) -> SkillResult:
    runs = [
        CaseRun(shard_id=f"s{i}", case_id=i, model=MODEL, epoch=1, state=ShardState.GRADED, composite=s)
        for i, s in enumerate(scores, start=1)
    ]
    return SkillResult.model_construct(
        skill="forecast", variant="current", inconclusive=False, plugin_scores=suite_scores([1, 2], runs)
    )


def _verdict(scores: list[float], threshold: float, plugin_threshold: float | None) -> str:
    [suite] = with_verdicts([_suite(scores)], threshold, plugin_threshold)
    return suite.verdict


def test_a_plugin_suite_passes_only_when_every_case_reaches_its_threshold() -> None:
    # Without --threshold a case must reach the run's threshold: 1.0 by default, or --fail-under.
    assert _verdict([1.0, 1.0], 1.0, None) == "PASS"
    assert _verdict([1.0, 0.9], 1.0, None) == "FAIL"
    assert _verdict([1.0, 0.9], 0.9, None) == "PASS"
    # --threshold is plugin eval's own: it is what every case must score, whatever the run's threshold.
    assert _verdict([1.0, 0.9], 1.0, 0.9) == "PASS"
    assert _verdict([1.0, 0.89], 0.5, 0.9) == "FAIL"
    # Scores summed in another order must not cross the threshold by a rounding error.
    assert _verdict([1.0, 0.1 + 0.2], 1.0, 0.3) == "PASS"
    label = case_threshold_label(1.0, "default", 0.9)
    assert below_threshold(_suite([1.0, 0.89]), 0.9, label) == [
        f"forecast: plugin eval case 2 scores 0.890 with {MODEL}, below --threshold 0.9"
    ]
    assert case_threshold_label(1.0, "default", None) == "the threshold 1.0 (default)"


def test_claude_code_gets_the_mocks_as_its_only_mcp_servers_and_only_the_allowed_tools() -> None:
    request = HarnessRequest(
        binary="/run/bin/harness",
        model="anthropic/claude-sonnet-4-5",
        skill="forecast",
        skill_files={},
        prompt="Weather?",
        invoke=Invoke.EXPLICIT,
        workspace="/workspace",
        home="/home/agent",
        allowed_tools=("Bash", "Read", "mcp__weather__get_forecast"),
        mock_servers={"weather": ("get_forecast", "get_alerts")},
    )
    argv = list(ClaudeCode().plan(request).argv)
    assert "--strict-mcp-config" in argv
    config = json.loads(argv[argv.index("--mcp-config") + 1])
    assert config == {
        "mcpServers": {"weather": {"type": "stdio", "command": "python3", "args": [MOCK_SERVER, MOCK_FILE, "weather"]}}
    }
    assert argv[argv.index("--tools") + 1] == "Bash,Read,mcp__weather__get_forecast"
    assert argv[argv.index("--disallowedTools") + 1] == "mcp__weather__get_alerts"


def test_the_mock_server_speaks_mcp_over_stdio_with_the_products_answers(plugin_repo: Path, tmp_path: Path) -> None:
    case = Repo(plugin_repo).load(SUITE).corpus.case(2)
    mocks = tmp_path / "mocks"
    stage_mocks(case, mocks)
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "get_forecast", "arguments": {"city": "Oslo", "day": "today"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "get_forecast", "arguments": {"city": "Rome"}},
        },
    ]
    out = subprocess.run(
        ["python3", str(mocks / "mcp_mock_server.py"), str(mocks / "mocks.json"), "weather"],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.splitlines()
    replies = [json.loads(line) for line in out]
    assert [r["id"] for r in replies] == [1, 2, 3, 4]
    assert replies[0]["result"]["capabilities"] == {"tools": {}}
    assert replies[1]["result"]["tools"][0]["inputSchema"]["required"] == ["city"]
    [mock] = case.mocks
    for reply, args in ((replies[2], {"city": "Oslo", "day": "today"}), (replies[3], {"city": "Rome"})):
        expected = answer("weather", mock.tools[0], args)
        assert reply["result"] == {"content": [{"type": "text", "text": expected.text}], "isError": expected.is_error}
    assert replies[3]["result"]["isError"] is True


def test_an_executor_that_cannot_honour_a_cases_terms_is_refused_by_name(plugin_repo: Path) -> None:
    bundle = Repo(plugin_repo).load(SUITE)
    plan = RunPlan.model_construct(bundles=[bundle])
    for executor in ("agent", "claude-code", "codex"):
        check_case_terms(plan, executor)
    with pytest.raises(BadCorpus, match=r"evals\[0\]\.mocks: the cmd:my-agent executor"):
        check_case_terms(plan, "cmd:my-agent")
    with pytest.raises(BadCorpus, match=r"evals\[0\]\.mocks: the opencode executor does not apply"):
        check_case_terms(plan, "opencode")
    assert set(HARNESSES) <= set(HONOURS)  # every harness says which terms it applies


def test_every_harness_applies_a_cases_turn_limit_and_timeout() -> None:
    case = EvalCase(id=1, prompt="p", expected_output="-", files=(), assertions=("x",), max_turns=3, timeout_s=30)
    bundle = SkillBundle.model_construct(corpus_file="evals/s.evals.json", corpus=Corpus.model_construct(evals=[case]))
    for executor in ("agent", *HARNESSES):
        check_case_terms(RunPlan.model_construct(bundles=[bundle]), executor)


def test_a_dry_run_refuses_an_executor_that_cannot_apply_the_mocks(plugin_repo: Path) -> None:
    args = ["run", "--repo", str(plugin_repo), "--all-evals", "--dry-run", "--judge", "openai/y"]
    skill_eval = str(Path(sys.executable).parent / "skill-eval")
    refused = subprocess.run(
        [skill_eval, *args, "--executor", "opencode", "--model", "openai/x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "BLOCKED_BAD_CORPUS" in refused.stderr + refused.stdout
    assert "$.evals[0].mocks: the opencode executor does not apply" in refused.stderr + refused.stdout
    assert "Traceback" not in refused.stderr
    planned = subprocess.run(  # a model Claude Code can run: an Anthropic one
        [skill_eval, *args, "--executor", "claude-code", "--model", "anthropic/x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
