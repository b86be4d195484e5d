"""End to end: ``skill-eval run --all-evals --runs 2 --threshold 0.95`` on the fixture plugin, with the
built-in agent against the offline server. The plugin eval suite is picked up, its mocked MCP tool is
answered, and the report carries plugin eval's scores beside the pass rates; a case below the
threshold fails the run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reducer.render import md
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, checked_env, git_init, reports, scenario

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

FIXTURE = Path(__file__).parent / "fixtures" / "plugin-weather"
MODEL = "openai/exec-a"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


RULES = [
    {
        "name": "sunny-day",
        "tools": True,
        "contains": "weather in Paris tomorrow",
        "replies": [
            call("mcp__weather__get_forecast", city="Paris", day="tomorrow"),
            call("mcp__weather__get_forecast", city="Berlin"),  # refused by the mock's expect guard
            call("write_file", path="forecast.txt", content="Paris: sunny\n"),
            call("shell", command="cat forecast.txt"),
            {"text": "Tomorrow in Paris it will be sunny."},
        ],
    },
    {"name": "oslo", "tools": True, "contains": "raining in Oslo", "replies": [{"text": "It is sunny in Oslo."}]},
]
JUDGE = [{"assertion_contains": "forecast for Paris", "transcript_regex": r"^\[assistant\].*sunny"}]


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer(scenario(RULES, JUDGE)) as s:
        yield s


@pytest.fixture(params=["full", "streamed"])
def env(request: pytest.FixtureRequest, tmp_path: Path, server: OfflineModelServer) -> Iterator[Env]:
    with checked_env(tmp_path / "e2e", server.base_url) as e:
        if request.param == "streamed":  # the reduce that keeps no per-run record: the scores must not change
            e.extra["SKILL_EVAL_STREAM_REDUCE_SHARDS"] = "1"
        yield e


def test_a_plugin_suite_runs_as_written_and_is_scored_as_plugin_eval_scores_it(env: Env, tmp_path: Path) -> None:
    repo = tmp_path / "plugin-weather"
    shutil.copytree(FIXTURE, repo)
    git_init(repo)

    res = env.run(repo, "--all-evals", "--runs", "2", "--threshold", "0.95", models=(MODEL,))

    assert res.code == 1, res.stdout + res.stderr  # FAIL: the oslo case scores 1/3 < 0.95
    doc, markdown = reports(env.out, "forecast", res.run_id)
    [current] = [s for s in doc["variants"] if s["variant"] == "current"]
    [scores] = current["plugin_scores"]
    # sunny-day: every grader passes (no Edit call this time): 11/11; oslo-rain: 1/3, in both runs.
    assert [(c["case_id"], c["runs"], round(c["score"], 6)) for c in scores["cases"]] == [
        (1, 2, round(1 / 3, 6)),
        (2, 2, 1.0),
    ]
    assert scores["score"] == pytest.approx((1 / 3 + 1) / 2)
    assert doc["verdict"] == "FAIL"
    assert any("plugin eval case 1 scores 0.333" in r and "--threshold 0.95" in r for r in doc["reasons"])
    assert "### Plugin eval scores" in markdown
    [page] = [p for p in env.out.rglob("*.html") if res.run_id in p.read_text()]
    assert 'id="plugin-scores"' in page.read_text() and "0.333 (2 run(s))" in page.read_text()
    assert "plugin eval score (openai/exec-a): suite 0.667; cases 1=0.333, 2=1.000" in res.stdout
    if env.extra:
        assert current["runs"] == []  # the streamed reduce ran: it lists no runs
        return
    # The mock call and its answer are in the trajectory the judge read.
    sunny = [r for r in current["runs"] if r["case_id"] == 2]
    assert all(len(r["verdicts"]) == 8 and all(v["passed"] for v in r["verdicts"]) for r in sunny)
    # The guard's refusal is a finding of each sunny-day run, in the json and the markdown.
    finding = "mcp__weather__get_forecast: unexpected input city='Berlin' (expected /^(Paris|Oslo)$/)"
    assert all(r["mock_findings"] == [finding] for r in sunny)
    assert f"- **mock finding**: {md(finding)}" in markdown


def test_threshold_is_what_every_case_must_score_whatever_the_runs_threshold(env: Env, tmp_path: Path) -> None:
    repo = tmp_path / "plugin-weather"
    shutil.copytree(FIXTURE, repo)
    git_init(repo)

    # oslo-rain scores 1/3: below the strict default 1.0, at or above --threshold 0.3, which decides.
    res = env.run(repo, "--all-evals", "--runs", "2", "--threshold", "0.3", models=(MODEL,))

    assert res.code == 0, res.stdout + res.stderr
    doc, markdown = reports(env.out, "forecast", res.run_id)
    assert doc["verdict"] == "PASS"
    assert doc["threshold"] == {"value": 1.0, "source": "default", "plugin_eval_cases": 0.3}
    [current] = [s for s in doc["variants"] if s["variant"] == "current"]
    assert current["verdict"] == "PASS"
    assert "- threshold 1.0 (default); plugin eval cases: --threshold 0.3: a plugin eval suite passes" in markdown
    block = res.stdout[res.stdout.index("SKILL-EVAL COMPLETE") :].strip().splitlines()
    assert "threshold: 1.0 (default); plugin eval cases: --threshold 0.3" in block
    [page] = [p for p in env.out.rglob("*.html") if res.run_id in p.read_text()]
    assert "A plugin eval suite passes when every case's score reaches --threshold 0.3." in page.read_text()
    score = block.index("  plugin eval score (openai/exec-a): suite 0.667; cases 1=0.333, 2=1.000")
    assert block[-1] == "verdict: PASS" and score < len(block) - 1
