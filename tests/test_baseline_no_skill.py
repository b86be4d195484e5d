"""``--baseline no-skill`` end to end: the embedded cluster, the offline model server, the reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.offline_server import OfflineModelServer
from tests.conftest import git

SKILL_TEXT = "Greet by running the shell command: echo hello. (with the skill)"
CASES = 6  # the fewest pass/fail cases an exact test can call significant at 5%

SCENARIO = {
    "rules": [
        {
            "tools": True,
            "contains": "(with the skill)",
            "replies": [
                {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hello"}}]},
                {"text": "done"},
            ],
        },
        {"tools": True, "contains": "Say hello", "replies": [{"text": "Hello there!"}]},
    ],
    "judge": [{"assertion_contains": "runs echo hello", "transcript_regex": r"\[tool_call\] shell\(.*echo hello"}],
}


def make_repo(root: Path, cases: int = CASES) -> Path:
    (root / "skills" / "greeter").mkdir(parents=True)
    (root / "evals").mkdir()
    corpus = {
        "skill_name": "greeter",
        "evals": [
            {
                "id": i,
                "prompt": f"Say hello ({i})",
                "expected_output": "hello printed",
                "files": [],
                "assertions": ["The agent runs echo hello in the shell"],
            }
            for i in range(1, cases + 1)
        ],
    }
    (root / "evals" / "greeter.evals.json").write_text(json.dumps(corpus))
    (root / "skills" / "greeter" / "SKILL.md").write_text(SKILL_TEXT)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "skill")
    return root


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer(SCENARIO) as s:
        yield s


def run_cli(repo: Path, tmp_path: Path, server: OfflineModelServer, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "producer.commands.cli",
        "run",
        "greeter",
        "--repo",
        str(repo),
        "--model",
        "openai/exec",
        "--judge",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--no-calibration",
        "--out",
        str(tmp_path / "zuvo" / "reports"),
        "--store",
        str(tmp_path / "store"),
        *extra,
    ]
    env = {**os.environ, "SKILL_EVAL_RUN_LOG": str(tmp_path / "runs.log")}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_skill_that_helps_passes_require_uplift_with_paired_figures_in_every_report(
    tmp_path: Path, server: OfflineModelServer
) -> None:
    repo = make_repo(tmp_path / "repo")
    result = run_cli(repo, tmp_path, server, "--baseline", "no-skill", "--require-uplift")
    assert result.returncode == 0, result.stdout + result.stderr
    # Power is printed before the run.
    assert "power: to detect a 10-point difference" in result.stderr
    assert "skill: greeter [no-skill]  cases: 6  result: 0/6 (0.0%)" in result.stdout
    assert "skill: greeter [current]  cases: 6  result: 6/6 (100.0%)" in result.stdout
    assert "compare greeter: current vs no-skill: +100.0 pts, 95% CI +61.0 pts to +100.0 pts" in result.stdout
    assert "McNemar's exact test over cases: two-sided p = 0.0312" in result.stdout
    assert "measured, not gated" not in result.stdout  # --require-uplift gated it
    # The no-skill executor never saw the skill: no request of that arm carries its text or name.
    prompts = [json.dumps(r) for r in server.requests() if r.get("tools")]
    with_skill = [p for p in prompts if "(with the skill)" in p]
    without = [p for p in prompts if "(with the skill)" not in p]
    assert len({p for p in with_skill if '"role": "user"' in p}) >= CASES
    assert without and all("greeter" not in p for p in without)
    reports = tmp_path / "zuvo" / "reports"
    md = next(reports.glob("skill-eval-greeter-*.md")).read_text()
    assert "## With vs without the skill: no-skill" in md
    assert "bare case prompt" in md and "Gate: --require-uplift 0" in md
    page = next(reports.glob("skill-eval-*.html")).read_text()
    assert "With vs without the skill" in page and 'id="quality"' in page
    doc = json.loads(next(reports.glob("skill-eval-greeter-*.json")).read_text())
    overall = next(c for c in doc["comparisons"] if c["model"] is None)
    assert overall["kind"] == "no-skill" and overall["test"] == "mcnemar-exact"
    assert overall["better"] == CASES and overall["dropped"] == 0
    assert doc["gates"] == {"regression_alpha": None, "require_uplift": 0.0}
    # Reducing the run again gives the same interval (and any Monte Carlo p: its seed is the run id's).
    run_id = doc["run_id"]
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "producer.commands.cli",
            "report",
            run_id,
            "--store",
            str(tmp_path / "store"),
            "--out",
            str(tmp_path / "again"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    redo = json.loads(next((tmp_path / "again").glob("skill-eval-greeter-*.json")).read_text())
    assert redo["comparisons"] == doc["comparisons"]
    # The same run as Inspect AI logs, read back with Inspect's own reader: one per arm.
    from inspect_ai.log import read_eval_log

    export = [sys.executable, "-m", "producer.commands.cli", "export", run_id, "--store", str(tmp_path / "store")]
    done = subprocess.run([*export, "--out", str(tmp_path / "inspect")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    logs = {
        lg.eval.metadata["variant"]: lg for lg in map(read_eval_log, map(str, (tmp_path / "inspect").glob("*.eval")))
    }
    assert set(logs) == {"current", "no-skill"}
    with_skill = logs["current"].samples or []
    assert len(with_skill) == CASES and all(s.scores and s.scores["pass_rate"].value == 1.0 for s in with_skill)
    assert any(m.role == "tool" for m in with_skill[0].messages)
    assert all(s.scores and s.scores["pass_rate"].value == 0.0 for s in logs["no-skill"].samples or [])
    bad = subprocess.run([*export, "--format", "csv"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "CONFIG_ERROR" in bad.stderr


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_an_uplift_measured_without_require_uplift_is_said_not_gated_in_the_reason(
    tmp_path: Path, server: OfflineModelServer
) -> None:
    """A PASS after ``--baseline no-skill`` alone must not read as the skill having helped: nothing
    decided the uplift, and the console's reason says so (the markdown report says ``Gate: none``)."""
    repo = make_repo(tmp_path / "repo")
    result = run_cli(repo, tmp_path, server, "--baseline", "no-skill")
    assert result.returncode == 0, result.stdout + result.stderr
    reasons = [line for line in result.stdout.splitlines() if line.startswith("reason: ")]
    assert reasons == [
        "reason: all corpora graded and at or above the threshold 1.0 (default); "
        "uplift over no skill measured, not gated (--require-uplift)"
    ], result.stdout
    assert result.stdout.splitlines()[-1] == "verdict: PASS"


def test_a_skill_that_does_nothing_fails_require_uplift(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    same = {**SCENARIO, "rules": [{"tools": True, "contains": "Say hello", "replies": [{"text": "Hello!"}]}]}
    with OfflineModelServer(same) as server:
        # Two epochs: four verdicts per assertion over two arms, enough to call one non-discriminating.
        args = ("--baseline", "no-skill", "--require-uplift", "0.05", "--epochs", "2")
        result = run_cli(repo, tmp_path, server, *args)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "greeter: uplift over no skill +0.0 pts" in result.stdout
    assert "lower bound not above the margin +5.0 pts" in result.stdout
    # The assertion fails with and without the skill: `skill-eval assertions` says it cannot discriminate.
    run_id = next(line.split(": ", 1)[1] for line in result.stdout.splitlines() if line.startswith("run: "))
    listed = subprocess.run(
        [sys.executable, "-m", "producer.commands.cli", "assertions", run_id, "--store", str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert f"run {run_id}: 6 assertions with graded verdicts, 6 listed" in listed.stdout
    assert "greeter case 1 assertion 1: non-discriminating (always fail) [4 verdicts, 0% passed]" in listed.stdout
    as_json = subprocess.run(
        [
            sys.executable,
            "-m",
            "producer.commands.cli",
            "assertions",
            run_id,
            "--store",
            str(tmp_path / "store"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    rows = json.loads(as_json.stdout)
    assert len(rows) == CASES and all(r["non_discriminating"] and r["constant"] == "fail" for r in rows)
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "producer.commands.cli",
            "assertions",
            "no-such-run",
            "--store",
            str(tmp_path / "store"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and "STORE_ERROR" in missing.stderr
