"""Compare mode: the old skill text is graded beside the new one, or a named guard says why not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from producer.corpus.repo import Repo
from producer.plan.compare import check_compare, guard_compare, restrict_baseline
from producer.plan.planning import plan_run
from schemas.errors import BadRef, NoGit
from schemas.shard import CURRENT, baseline_variant
from testkit.offline_server import OfflineModelServer
from tests.conftest import git

OLD_TEXT = "Greet by running the shell command: echo hello. (version one)"
NEW_TEXT = "Greet politely in prose; never run commands. (version two)"

SCENARIO = {
    "rules": [
        {
            "tools": True,
            "contains": "(version one)",
            "replies": [
                {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hello"}}]},
                {"text": "done"},
            ],
        },
        {"tools": True, "contains": "(version two)", "replies": [{"text": "Hello there!"}]},
    ],
    "judge": [{"assertion_contains": "runs echo hello", "transcript_regex": r"\[tool_call\] shell\(.*echo hello"}],
}


def make_repo(root: Path) -> Path:
    """A git repo whose skill text changed between two commits (v1 at HEAD~1, v2 at HEAD)."""
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
            for i in (1, 2, 3, 4)
        ],
    }
    (root / "evals" / "greeter.evals.json").write_text(json.dumps(corpus))
    (root / "skills" / "greeter" / "SKILL.md").write_text(OLD_TEXT)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "v1")
    (root / "skills" / "greeter" / "SKILL.md").write_text(NEW_TEXT)
    git(root, "commit", "-q", "-am", "v2")
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_guards_name_a_missing_git_repo_and_a_bad_ref(repo: Path, tmp_path: Path) -> None:
    assert check_compare(repo, "HEAD~1", "greeter") is None
    assert isinstance(check_compare(repo, "no-such-ref", "greeter"), BadRef)
    assert isinstance(check_compare(repo, "--output=/tmp/x", "greeter"), BadRef)  # never an option
    assert isinstance(check_compare(repo, "HEAD~1", "other-skill"), BadRef)  # skill absent at the ref
    plain = tmp_path / "plain"
    plain.mkdir()
    guard = check_compare(plain, "HEAD", "greeter")
    assert isinstance(guard, NoGit)
    assert str(guard).startswith("GUARD_NO_GIT: ")


def test_a_guarded_skill_keeps_only_its_current_shards(repo: Path) -> None:
    bundle = Repo(repo).load("evals/greeter.evals.json")
    plan = plan_run("r", [bundle], ["m"], variants=[CURRENT, baseline_variant("v0")])
    assert len(restrict_baseline(plan, "v0", {"greeter"}).shards) == 8
    only_current = restrict_baseline(plan, "v0", set())
    assert {s.variant for s in only_current.shards} == {CURRENT}
    assert only_current.variants == (CURRENT,)


def test_the_compare_guard_drops_the_baseline_arm_it_names(repo: Path, tmp_path: Path) -> None:
    bundle = Repo(repo).load("evals/greeter.evals.json")
    variants = [CURRENT, baseline_variant("HEAD~1")]
    guarded, lines = guard_compare(plan_run("r", [bundle], ["m"], variants=variants), repo, "HEAD~1")
    assert lines == [] and len(guarded.shards) == 8
    plain = tmp_path / "copy"
    shutil.copytree(repo, plain, ignore=shutil.ignore_patterns(".git"))
    bundle = Repo(plain).load("evals/greeter.evals.json")
    guarded, lines = guard_compare(plan_run("r", [bundle], ["m"], variants=variants), plain, "HEAD~1")
    assert [line.split(": ")[:2] for line in lines] == [["greeter", "GUARD_NO_GIT"]]
    assert guarded.variants == (CURRENT,) and {s.variant for s in guarded.shards} == {CURRENT}


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
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)


@pytest.mark.slow
def test_a_skill_that_got_worse_than_its_baseline_fails_with_exit_1(
    repo: Path, tmp_path: Path, server: OfflineModelServer
) -> None:
    result = run_cli(repo, tmp_path, server, "--compare", "HEAD~1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "verdict: FAIL" in result.stdout
    assert "greeter: regression 4/4 (100.0%) -> 0/4 (0.0%)" in result.stdout
    # The baseline's executor read the OLD skill text from its own workspace, the current one the new.
    prompts = [json.dumps(r) for r in server.requests() if r.get("tools")]
    assert sum("(version one)" in p for p in prompts) >= 4
    assert sum("(version two)" in p for p in prompts) == 4
    report = next((tmp_path / "zuvo" / "reports").glob("skill-eval-greeter-*.md")).read_text()
    assert "Overall: baseline@HEAD~1 4/4 (100.0%) -> current 0/4 (0.0%)" in report
    audit = next((tmp_path / "zuvo" / "context").glob("skill-eval-baseline-greeter-*.txt")).read_text()
    assert OLD_TEXT in audit


@pytest.mark.slow
def test_a_bad_ref_is_reported_and_the_current_version_is_still_graded(
    repo: Path, tmp_path: Path, server: OfflineModelServer
) -> None:
    result = run_cli(repo, tmp_path, server, "--compare", "no-such-ref")
    assert "GUARD_BAD_REF: could not read no-such-ref:skills/greeter/SKILL.md" in result.stderr
    assert "skill: greeter [current]  cases: 4  result: 0/4 (0.0%)  FAIL (below threshold 1.0)" in result.stdout
    assert "baseline@" not in result.stdout
    assert result.returncode == 1  # nothing was compared; the current version, graded, failed its threshold


@pytest.mark.slow
def test_a_comparison_a_bad_ref_skipped_warns_with_exit_3_and_never_reads_no_regression(
    repo: Path, tmp_path: Path, server: OfflineModelServer
) -> None:
    # The threshold lowered to 0 passes the graded current version: only the skipped comparison can decide.
    result = run_cli(repo, tmp_path, server, "--compare", "HEAD~5", "--fail-under", "0")
    assert result.returncode == 3, result.stdout + result.stderr
    skipped = "comparison skipped: greeter: GUARD_BAD_REF: could not read HEAD~5:skills/greeter/SKILL.md"
    assert f"reason: {skipped}" in result.stdout
    assert result.stdout.rstrip().endswith("verdict: WARN")
    assert "no regression" not in result.stdout and "no drop against" not in result.stdout
    report = next((tmp_path / "zuvo" / "reports").glob("skill-eval-greeter-*.md")).read_text()
    assert skipped in report and "no regression" not in report and "no drop against" not in report
