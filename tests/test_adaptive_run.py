"""``--epochs auto`` end to end: the embedded cluster, the offline model server, rounds on one run, the reports.

The scripted executor runs ``echo hello`` always in cases 1-4 and with probability 1/2 per
conversation in cases 5-8 (a ``pick`` drawn from the scenario's seed); the judge passes "runs
echo hello" exactly when the transcript shows it. Cases 1-4 can never vary: they must stop after
the first round. The threshold sits at the true rate (3/4), so the gate cannot be decided and a
case that varied goes on to ``--max-epochs``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from engine.state import RunState
from reducer.first_round import series_estimates
from schemas.status import ShardState
from testkit.offline_server import OfflineModelServer
from tests.test_baseline_no_skill import make_repo, run_cli

CASES = 8
STEADY = range(1, 5)
MAX_EPOCHS = 5


def scenario(seed: int) -> dict[str, object]:
    echo = {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hello"}}]}
    coin = [{"weight": 1, "reply": echo}, {"weight": 1, "reply": {"text": "Hello there!"}}]
    steady = [{"tools": True, "contains": f"Say hello ({i})", "replies": [echo, {"text": "done"}]} for i in STEADY]
    return {
        "seed": seed,
        "rules": [*steady, {"tools": True, "contains": "Say hello", "replies": [{"pick": coin}, {"text": "done"}]}],
        "judge": [{"assertion_contains": "runs echo hello", "transcript_regex": r"\[tool_call\] shell\(.*echo hello"}],
    }


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "producer.commands.cli", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_adaptive_epochs_go_to_the_varying_cases_and_every_report_says_why_each_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", cases=CASES)
    with OfflineModelServer(scenario(21)) as server:
        result = run_cli(
            repo, tmp_path, server, "--epochs", "auto", "--max-epochs", str(MAX_EPOCHS), "--fail-under", "0.75"
        )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    assert "adaptive epochs, look 1/2" in result.stderr
    assert "adaptive epochs greeter: " in result.stdout
    reports = tmp_path / "zuvo" / "reports"
    doc = json.loads(next(reports.glob("skill-eval-greeter-*.json")).read_text())
    adaptive = doc["adaptive"]
    cases = {c["case_id"]: c for c in adaptive["cases"]}
    assert all(cases[i]["epochs"] == 3 and cases[i]["stopped"] == "stable" for i in STEADY)
    varied = [c for c in cases.values() if c["epochs"] > 3]
    assert varied and all(c["epochs"] == MAX_EPOCHS and c["stopped"] == "max-epochs" for c in varied)
    current = next(s for s in doc["variants"] if s["variant"] == "current")
    assert current["shard_count"] == sum(c["epochs"] for c in cases.values()) < CASES * MAX_EPOCHS
    assert sorted({r["epoch"] for r in current["runs"] if r["case_id"] == varied[0]["case_id"]}) == list(range(5))
    # Each case weighs once, whatever its epochs: the rate is the mean of the per-case rates, a case
    # that went on past its first round rated as that round would be (unbiased under the rule).
    passes = {c: sum(v["passed"] for r in current["runs"] if r["case_id"] == c for v in r["verdicts"]) for c in cases}
    per_case = [series_estimates([(passes[c], cases[c]["epochs"])], 3)[0] for c in cases]
    assert current["behavioural"]["rate"] == pytest.approx(sum(per_case) / CASES)
    # The one model's row says the same (pooled, the cases that got more epochs would count more).
    assert [m["behavioural"]["rate"] for m in current["models"]] == [pytest.approx(sum(per_case) / CASES)]
    assert adaptive["gates"][0]["figure"] == "pass-rate" and adaptive["gates"][0]["decided"] == ""
    md = next(reports.glob("skill-eval-greeter-*.md")).read_text()
    assert "## Adaptive epochs" in md and "| 1 | 3 | stable | its verdicts never varied |" in md
    html = next(reports.glob("skill-eval-*.html")).read_text()
    assert '<section id="adaptive">' in html
    # The run's last manifest revision (what a resubmit's workers and reduce read) holds the final record.
    revisions = sorted((tmp_path / "store").rglob("manifest.r*.json"), key=lambda p: int(p.stem.split(".r")[1]))
    last = json.loads(revisions[-1].read_text())["plan"]["adaptive"]
    assert [(c["case_id"], c["epochs"], c["stopped"]) for c in last["cases"]] == [
        (c["case_id"], c["epochs"], c["stopped"]) for c in adaptive["cases"]
    ]
    # A report of the stored run says the same: the stored plan records each case's epochs and stop.
    again = _cli("report", doc["run_id"], "--store", str(tmp_path / "store"), "--out", str(tmp_path / "again"))
    assert again.returncode in (0, 1), again.stdout + again.stderr
    redone = json.loads(next((tmp_path / "again").glob("skill-eval-greeter-*.json")).read_text())
    assert redone["adaptive"]["cases"] == adaptive["cases"]
    assert next(s for s in redone["variants"] if s["variant"] == "current")["behavioural"] == current["behavioural"]
    # The streamed reduce (large runs) weighs the cases as the full one does.
    monkeypatch.setenv("SKILL_EVAL_STREAM_REDUCE_SHARDS", "1")
    streamed = _cli("report", doc["run_id"], "--store", str(tmp_path / "store"), "--out", str(tmp_path / "streamed"))
    assert streamed.returncode in (0, 1), streamed.stdout + streamed.stderr
    by_stream = json.loads(next((tmp_path / "streamed").glob("skill-eval-greeter-*.json")).read_text())
    arm = next(s for s in by_stream["variants"] if s["variant"] == "current")
    assert arm["runs"] == [] and arm["shard_count"] == current["shard_count"] and arm["unfinished"] == 0
    assert arm["behavioural"]["rate"] == pytest.approx(current["behavioural"]["rate"])
    assert arm["headline"] == current["headline"]
    assert [m["behavioural"]["rate"] for m in arm["models"]] == [pytest.approx(current["behavioural"]["rate"])]


def test_the_dry_run_shows_the_first_round_and_the_most_an_adaptive_run_may_spend(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", cases=CASES)
    plan = _cli("run", "greeter", "--repo", str(repo), "--epochs", "auto", "--max-epochs", "9", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert "epochs auto: a first round of 3 per case (the shards above), then 2 more per round" in plan.stdout
    assert "up to 9 (at most 72 shards)" in plan.stdout and "over 4 looks, Bonferroni" in plan.stdout
    as_json = _cli(
        "run", "greeter", "--repo", str(repo), "--epochs", "auto", "--max-epochs", "9", "--dry-run", "--json"
    )
    summary = json.loads(as_json.stdout)
    assert summary["epochs"] == 3 and summary["totals"]["shards"] == 24 and summary["max_shards"] == 72
    assert summary["adaptive"]["max_epochs"] == 9


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--epochs", "auto"], "--epochs auto needs --max-epochs N"),
        (["--epochs", "3", "--max-epochs", "5"], "--max-epochs goes with --epochs auto"),
        (["--epochs", "many"], "neither a whole number nor auto"),
        (["--epochs", "0"], "--epochs must be at least 1"),
        (["--epochs", "auto", "--max-epochs", "5", "--baseline", "same"], "would inflate the noise floor"),
    ],
)
def test_bad_epoch_flags_are_named_errors(tmp_path: Path, args: list[str], message: str) -> None:
    repo = make_repo(tmp_path / "repo", cases=2)
    done = _cli("run", "greeter", "--repo", str(repo), *args, "--dry-run")
    assert done.returncode != 0 and message in done.stdout + done.stderr


def test_a_reduced_run_grown_by_a_round_is_reduced_again_only_when_the_new_shards_end(
    redis_client: redis.Redis,
) -> None:
    run = "20260101-000000-0000beef"
    state = RunState(redis_client)
    state.register(run, ["a"], "runs/x/manifest.json", "2026-01-01T00:00:00")
    for step in (ShardState.EXECUTING, ShardState.EXECUTED, ShardState.GRADING):
        state.transition(run, "a", step)
    assert state.transition(run, "a", ShardState.GRADED).finished_run
    state.mark_reduced(run)
    # The next round: registered first (more shards than ended), then reopened.
    state.register(run, ["a", "b"], "runs/x/manifest.r2.json", "2026-01-01T00:00:00")
    state.reopen(run)
    assert not state.reduced(run) and run in state.active_runs()
    assert state.totals(run) == (1, 2) and state.manifest_key(run) == "runs/x/manifest.r2.json"
    for step in (ShardState.EXECUTING, ShardState.EXECUTED, ShardState.GRADING):
        state.transition(run, "b", step)
    assert state.transition(run, "b", ShardState.GRADED).finished_run


def paired_scenario(seed: int) -> dict[str, object]:
    """With the skill the agent runs echo hello half the time; without it, never."""
    echo = {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hello"}}]}
    coin = [{"weight": 1, "reply": echo}, {"weight": 1, "reply": {"text": "Hello there!"}}]
    return {
        "seed": seed,
        "rules": [
            {"tools": True, "contains": "(with the skill)", "replies": [{"pick": coin}, {"text": "done"}]},
            {"tools": True, "contains": "Say hello", "replies": [{"text": "Hello there!"}]},
        ],
        "judge": [{"assertion_contains": "runs echo hello", "transcript_regex": r"\[tool_call\] shell\(.*echo hello"}],
    }


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_with_a_gating_baseline_both_arms_get_the_same_epochs_and_the_paired_difference_decides(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", cases=6)
    with OfflineModelServer(paired_scenario(5)) as server:
        result = run_cli(
            repo,
            tmp_path,
            server,
            "--baseline",
            "no-skill",
            "--require-uplift",
            "--epochs",
            "auto",
            "--max-epochs",
            "5",
        )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    doc = json.loads(next((tmp_path / "zuvo" / "reports").glob("skill-eval-greeter-*.json")).read_text())
    gate = doc["adaptive"]["gates"][0]
    assert gate["figure"] == "paired-difference" and gate["target"] == 0
    epochs = {c["case_id"]: c["epochs"] for c in doc["adaptive"]["cases"]}
    arms = {v["variant"]: v for v in doc["variants"]}
    for arm in ("current", "no-skill"):
        got: dict[int, int] = {}
        for r in arms[arm]["runs"]:
            got[r["case_id"]] = got.get(r["case_id"], 0) + 1
        assert got == epochs, arm
    assert any(e > 3 for e in epochs.values()) or gate["decided"] == "above"
