"""End to end: ``skill-eval run --all-evals --runs 2 --threshold 0.95`` on the fixture plugin, with the
built-in agent against the offline server. The plugin eval suite is picked up, its mocked MCP tool is
answered, and the report carries plugin eval's scores beside the pass rates; a case below the
threshold fails the run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reducer.render import md
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, case, checked_env, git_init, ran, reports, scenario, shell_rule, write_skill

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

FIXTURE = Path(__file__).parent / "fixtures" / "plugin-weather"
MODEL = "openai/exec-a"

SCORE_LINE = "plugin eval score (openai/exec-a): suite 0.667; cases 1 (oslo-rain)=0.333, 2 (sunny-day)=1.000"


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
    assert any("plugin eval case 1 (oslo-rain) scores 0.333" in r and "--threshold 0.95" in r for r in doc["reasons"])
    assert "### Plugin eval scores" in markdown
    # Each case is named by its folder beside its number (numbered in folder order).
    assert current["case_names"] == {"1": "oslo-rain", "2": "sunny-day"}
    assert "| model | suite score | case 1 (oslo-rain) | case 2 (sunny-day) |" in markdown
    [page] = [p for p in env.out.rglob("*.html") if res.run_id in p.read_text()]
    html = page.read_text()
    assert 'id="plugin-scores"' in html and "0.333 (2 runs)" in html
    assert "<th>case 1 (oslo-rain)</th>" in html and "<th>case 2 (sunny-day)</th>" in html
    assert SCORE_LINE in res.stdout
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
    assert f"#### case 2 (sunny-day) · {MODEL} · epoch 0: graded" in markdown
    assert "case 2 (sunny-day) · " in html


def test_threshold_is_what_every_case_must_score_whatever_the_runs_threshold(env: Env, tmp_path: Path) -> None:
    repo = tmp_path / "plugin-weather"
    shutil.copytree(FIXTURE, repo)
    git_init(repo)

    # oslo-rain scores 1/3: below the strict default 1.0, at or above --threshold 0.3, which decides.
    res = env.run(repo, "--all-evals", "--runs", "2", "--threshold", "0.3", models=(MODEL,))

    assert res.code == 0, res.stdout + res.stderr
    doc, markdown = reports(env.out, "forecast", res.run_id)
    assert doc["verdict"] == "PASS"
    bar = "threshold 0.3 (--threshold) on every plugin eval case's score"
    assert doc["threshold"] == {
        "value": 1.0,
        "source": "default",
        "plugin_eval_cases": 0.3,
        "applies_to": [],
        "text": bar,
    }
    [current] = [s for s in doc["variants"] if s["variant"] == "current"]
    basis = "every plugin eval case at or above --threshold 0.3; lowest: case 1 (oslo-rain), 0.333 with openai/exec-a"
    assert (current["verdict"], current["verdict_basis"]) == ("PASS", basis)
    assert doc["reasons"] == ["all corpora graded; every plugin eval case's score at or above --threshold 0.3"]
    assert (
        f"- {bar}: A plugin eval suite passes when every case's score, per executor model, reaches --threshold 0.3"
        in markdown
    )
    assert f"## current: 18/22 (81.8%) — PASS ({basis})" in markdown
    block = res.stdout[res.stdout.index("SKILL-EVAL COMPLETE") :].strip().splitlines()
    assert "threshold: 0.3 (--threshold) on every plugin eval case's score" in block
    assert f"skill: forecast [current]  cases: 2  result: 18/22 (81.8%)  PASS ({basis})" in block
    [page] = [p for p in env.out.rglob("*.html") if res.run_id in p.read_text()]
    html = page.read_text()
    assert (
        "A plugin eval suite passes when every case&#x27;s score, per executor model, reaches --threshold 0.3" in html
    )
    # No surface puts the run's unused pass-rate threshold (1.0, default) beside the suite's PASS.
    [junit] = list(env.out.rglob("*.junit.xml"))
    for text in (res.stdout, markdown, html, json.dumps(doc["reasons"]), junit.read_text()):
        assert "1.0 (default)" not in text and "behavioural pass rate reaches" not in text
    score = block.index(f"  {SCORE_LINE}")
    assert block[-1] == "verdict: PASS" and score < len(block) - 1
    # The evidence figure says what it counted: the judged passes, not the deterministic checks'.
    assert "Evidence a judge quoted was found in a tool call or result for 0/2 judged passes (0.0%); " in markdown
    assert "the other 16 passes were not looked up (a deterministic check reads the run itself)." in markdown
    assert "Evidence found in the transcript" not in markdown


def test_fail_under_beside_threshold_is_refused_for_a_run_of_plugin_suites_only(env: Env, tmp_path: Path) -> None:
    repo = tmp_path / "plugin-weather"
    shutil.copytree(FIXTURE, repo)
    git_init(repo)

    # --fail-under would gate no corpus here: the suite's 81.8% pass rate decides nothing.
    res = env.run(repo, "--all-evals", "--threshold", "0.3", "--fail-under", "0.9", models=(MODEL,))

    assert res.code == 2, res.stdout + res.stderr
    assert "CONFIG_ERROR: --fail-under 0.9: every corpus of this run is a Claude Code plugin eval suite" in res.stderr
    assert "SKILL-EVAL COMPLETE" not in res.stdout and not list(env.out.rglob("*.json"))


def test_a_run_mixing_a_plugin_suite_and_a_corpus_names_each_ones_threshold(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = tmp_path / "plugin-weather"
    shutil.copytree(FIXTURE, repo)
    (repo / "README.md").write_text("# weather\n")
    write_skill(repo, "greeter", [case(i, f"Greet {i}: say hello.", ["The agent runs echo hello"]) for i in (1, 2)])
    # With a second skill in the plugin, each suite case names the skill it belongs to.
    oslo, sunny = repo / "evals" / "oslo-rain" / "case.yaml", repo / "evals" / "sunny-day" / "prompt.md"
    oslo.write_text("skill: forecast\n" + oslo.read_text())
    sunny.write_text(sunny.read_text().replace("---\n", "---\nskill: forecast\n", 1))
    git_init(repo)
    server.set_scenario(scenario([*RULES, shell_rule("say hello", ["echo hello"])], [*JUDGE, ran("echo hello")]))

    res = env.run(repo, "--all-evals", "--runs", "2", "--threshold", "0.3", "--fail-under", "0.9", models=(MODEL,))

    assert res.code == 0, res.stdout + res.stderr
    block = res.stdout[res.stdout.index("SKILL-EVAL COMPLETE") :].strip().splitlines()
    assert "threshold: 0.9 (--fail-under) on pass rates; 0.3 (--threshold) on every plugin eval case's score" in block
    assert "skill: greeter [current]  cases: 2  result: 4/4 (100.0%)  PASS" in block
    basis = "every plugin eval case at or above --threshold 0.3; lowest: case 1 (oslo-rain), 0.333 with openai/exec-a"
    assert f"skill: forecast [current]  cases: 2  result: 18/22 (81.8%)  PASS ({basis})" in block
    assert (
        "reason: all corpora graded; every plugin eval case's score at or above --threshold 0.3 and every other "
        "corpus's pass rate at or above the threshold 0.9 (--fail-under)"
    ) in block
    doc, _ = reports(env.out, "forecast", res.run_id)
    assert doc["variants"][0]["verdict_basis"] == basis
    greeter, _ = reports(env.out, "greeter", res.run_id)
    assert (
        greeter["variants"][0]["verdict_basis"]
        == "behavioural pass rate 4/4 (100.0%) at or above the threshold 0.9 (--fail-under)"
    )
