"""End to end: the fixture plugin's suite with a focused llm grader and a baseline grader added, run with
``skill-eval run`` and the built-in agent against the offline server. The reference run is read when the
suite is loaded and travels in the plan; each vote grader is decided by three votes of its own judge,
and the report shows the votes beside the other verdicts."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, checked_env, git_init, reports, scenario
from tests.test_plugin_e2e import FIXTURE, JUDGE, MODEL, RULES

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
VOTE_RULES = [
    {"assertion_contains": "final message says", "transcript_regex": r"sunny"},
    {"assertion_contains": "at least as well", "transcript_regex": r"^\[tool_call\] mcp__weather__get_forecast"},
]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with (
        OfflineModelServer(scenario(RULES, [*JUDGE, *VOTE_RULES])) as server,
        checked_env(tmp_path / "e2e", server.base_url) as e,
    ):
        yield e


def test_focused_and_baseline_graders_are_voted_on_in_a_real_run(env: Env, tmp_path: Path) -> None:
    repo = tmp_path / "plugin-weather"
    shutil.copytree(FIXTURE, repo)
    case = repo / "evals" / "sunny-day"
    (case / "graders" / "i-focus.md").write_text(
        "---\ntype: llm\nfocus: last_message\n---\nThe final message says the Paris weather is sunny\n"
    )
    (case / "graders" / "j-baseline.md").write_text(
        "---\ntype: baseline\nbaseline_file: reference.jsonl\nweight: 2\n---\n"
        "The agent gets the forecast from the weather tool at least as well\n"
    )
    (case / "reference.jsonl").write_text(json.dumps({"role": "assistant", "content": "Paris: sunny"}) + "\n")
    git_init(repo)

    res = env.run(repo, "--all-evals", "--runs", "1", "--threshold", "0.3", models=(MODEL,))

    assert res.code == 0, res.stdout + res.stderr
    doc, markdown = reports(env.out, "forecast", res.run_id)
    [current] = [s for s in doc["variants"] if s["variant"] == "current"]
    [sunny] = [r for r in current["runs"] if r["case_id"] == 2]
    *_, focused, baseline = sunny["verdicts"]
    assert focused["passed"] and focused["note"] == "votes: openai/judge: PASS, PASS, PASS", focused
    assert baseline["passed"] and baseline["weight"] == 2.0
    assert "evals/sunny-day/reference.jsonl" in baseline["evidence"]
    assert all(v["passed"] for v in sunny["verdicts"])
    assert "votes: openai/judge: PASS, PASS, PASS" in markdown
    [scores] = current["plugin_scores"]
    assert [(c["case_id"], round(c["score"], 6)) for c in scores["cases"]] == [(1, round(1 / 3, 6)), (2, 1.0)]
