"""`validate` and `run --dry-run` say by name what the real run would refuse, before any model call.

Flag errors (a missing --repo, an unknown --executor or --invoke, an --api-base that is not a
URL, --detach without a broker) exit 2 and start nothing; case guards (base fixtures without
git, a --compare ref the skill is not at) are printed. A base fixture without git ends the run
BLOCKED, so ``validate`` and a dry run exit 2 for it; a --compare guard leaves the exit code alone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.redis_server import RedisServer
from producer.commands.cli import app
from tests.conftest import EXAMPLE_REPO, ROOT

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def plain_repo(tmp_path: Path) -> Path:
    """The example repo as a plain folder: no git (the commit-message corpus has base fixtures)."""
    repo = tmp_path / "plain"
    shutil.copytree(EXAMPLE_REPO, repo)
    return repo


@pytest.mark.parametrize(
    ("command", "exit_code"),
    [
        (["validate", "--all-evals"], 2),
        (["run", "--all-evals", "--dry-run"], 2),
        (["run", "--all-evals", "--dry-run", "--json"], 2),
    ],
    ids=["validate-exits-as-the-run-ends", "dry-run-exits-as-the-run-ends", "dry-run-json-too"],
)
def test_base_fixtures_in_a_repo_without_git_are_named(plain_repo: Path, command: list[str], exit_code: int) -> None:
    code, output = invoke(*command, "--repo", str(plain_repo))
    assert code == exit_code, output
    assert "BLOCKED_BAD_CORPUS" not in output  # the corpus is valid: the repo without git blocks it
    assert "BLOCKED_FIXTURE_NEEDS_GIT: evals/commit-message.evals.json: case 1:" in output
    assert "'src/greeting.py'" in output
    assert output.count("BLOCKED_FIXTURE_NEEDS_GIT") == 1  # the one case with base fixtures only


def test_the_same_corpora_in_a_git_repo_have_no_fixture_guard(example_repo: Path) -> None:
    code, output = invoke("validate", "--all-evals", "--repo", str(example_repo))
    assert code == 0, output
    assert "BLOCKED_FIXTURE_NEEDS_GIT" not in output


def test_a_worktree_checkout_counts_as_without_git(example_repo: Path, tmp_path: Path) -> None:
    """A .git file (a worktree) is dropped from every workspace, so base fixtures block there too."""
    worktree = tmp_path / "wt"
    subprocess.run(["git", "-C", str(example_repo), "worktree", "add", "-q", str(worktree)], check=True)
    code, output = invoke("run", "commit-message", "--dry-run", "--repo", str(worktree))
    assert code == 2, output
    assert "BLOCKED_FIXTURE_NEEDS_GIT: evals/commit-message.evals.json: case 1:" in output


def test_dry_run_names_a_compare_ref_that_does_not_exist(example_repo: Path) -> None:
    code, output = invoke("run", "commit-message", "--dry-run", "--compare", "no-such-ref", "--repo", str(example_repo))
    assert code == 0, output
    assert "commit-message: GUARD_BAD_REF: could not read no-such-ref:skills/commit-message/SKILL.md" in output

    args = ["run", "commit-message", "--dry-run", "--json", "--compare", "HEAD", "--repo", str(example_repo)]
    code, output = invoke(*args)
    assert code == 0, output
    assert json.loads(output)["guards"] == []  # the ref exists: nothing to say


def test_a_dry_run_without_git_plans_no_baseline_arm_as_its_guard_says(plain_repo: Path) -> None:
    code, output = invoke("run", "--all-evals", "--dry-run", "--compare", "HEAD~1", "--repo", str(plain_repo))
    assert code == 2, output  # a base fixture without git blocks the run; GUARD_NO_GIT alone would not
    assert "GUARD_NO_GIT: skill-eval --compare needs a git repository" in output
    assert "grading the current version only" in output
    assert "shards = cases x models x epochs = 4" in output  # the current arm alone, as the run plans it
    assert "baseline@" not in output

    args = ["run", "--all-evals", "--dry-run", "--json", "--compare", "HEAD~1", "--repo", str(plain_repo)]
    plan = json.loads(invoke(*args)[1])
    assert plan["variants"] == ["current"]
    assert [c["shards"] for c in plan["corpora"]] == [2, 2] and plan["totals"]["shards"] == 4


def test_a_dry_run_drops_the_baseline_arm_of_only_the_skill_whose_guard_fires(example_repo: Path) -> None:
    # A skill added after the compared ref has no old version: only its own baseline shards go.
    shutil.copytree(example_repo / "skills" / "changelog-entry", example_repo / "skills" / "release-note")
    corpus = json.loads((example_repo / "evals" / "changelog-entry.evals.json").read_text())
    corpus["skill_name"] = "release-note"
    (example_repo / "evals" / "release-note.evals.json").write_text(json.dumps(corpus))
    args = ["run", "--all-evals", "--dry-run", "--json", "--compare", "HEAD", "--repo", str(example_repo)]
    code, output = invoke(*args)
    assert code == 0, output
    plan = json.loads(output)
    assert plan["variants"] == ["current", "baseline@HEAD"]
    assert {c["skill"]: c["shards"] for c in plan["corpora"]} == {
        "changelog-entry": 4,
        "commit-message": 4,
        "release-note": 2,
    }
    assert plan["totals"]["shards"] == 10
    assert [g.split(": ")[0:2] for g in plan["guards"]] == [["release-note", "GUARD_BAD_REF"]]


def test_dry_run_json_carries_the_guards(example_repo: Path) -> None:
    args = ["run", "--all-evals", "--dry-run", "--json", "--compare", "nope", "--repo", str(example_repo)]
    code, output = invoke(*args)
    assert code == 0, output
    guards = json.loads(output)["guards"]
    assert [g.split(": ")[0:2] for g in guards] == [
        ["changelog-entry", "GUARD_BAD_REF"],
        ["commit-message", "GUARD_BAD_REF"],
    ]


def test_dry_run_without_models_prints_the_plan_and_says_what_a_run_needs(example_repo: Path) -> None:
    code, output = invoke("run", "--all-evals", "--dry-run", "--repo", str(example_repo))
    assert code == 0, output
    assert "(unspecified)" not in output
    assert "models: none given (shards counted for one model)  judges: none given" in output
    assert "a run needs --model and --judge" in output
    for row in (("changelog-entry", "2", "5"), ("commit-message", "2", "6"), ("total", "4", "11")):
        assert any(all(cell in line for cell in row) for line in output.splitlines()), row


def _bogus_flag_cases(tmp_path: Path) -> list[tuple[list[str], str]]:
    repo = ["--repo", str(EXAMPLE_REPO)]
    return [
        (["run", "commit-message", "--dry-run", "--repo", str(tmp_path / "nowhere")], "BLOCKED_BAD_REPO"),
        (["validate", "commit-message", "--repo", str(tmp_path / "nowhere")], "BLOCKED_BAD_REPO"),
        (["run", "commit-message", "--dry-run", "--executor", "claude", *repo], "CONFIG_ERROR: --executor"),
        (["run", "commit-message", "--dry-run", "--invoke", "sometimes", *repo], "CONFIG_ERROR: --invoke"),
        (["run", "commit-message", "--dry-run", "--api-base", "localhost:8080", *repo], "CONFIG_ERROR: --api-base"),
        (["run", "commit-message", "--dry-run", "--api-base", "http://", *repo], "CONFIG_ERROR: --api-base"),
    ]


@pytest.mark.parametrize("index", range(6))
def test_bad_flags_exit_2_with_a_named_error_in_a_dry_run(tmp_path: Path, index: int) -> None:
    args, expected = _bogus_flag_cases(tmp_path)[index]
    code, output = invoke(*args)
    assert code == 2, output
    assert expected in output
    assert "BLOCKED_DEV_ONLY" not in output  # a missing path is said to be missing, not to lack evals/
    assert "Plan " not in output


def test_a_missing_repo_says_the_path_is_missing(tmp_path: Path) -> None:
    code, output = invoke("run", "commit-message", "--dry-run", "--repo", str(tmp_path / "nowhere"))
    assert code == 2
    assert f"BLOCKED_BAD_REPO: {tmp_path / 'nowhere'}: no such folder" in output


def _real_run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The real command (not a dry run) with models named: it must refuse before any cluster or call."""
    exe = Path(sys.executable).parent / "skill-eval"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no broker, no key in the environment
    args = ["run", "commit-message", "--model", "openai/m", "--judge", "openai/j", "--out", str(tmp_path / "out")]
    return subprocess.run([str(exe), *args, *extra], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--api-base", "not a url", "--repo", str(EXAMPLE_REPO)], "CONFIG_ERROR: --api-base: 'not a url' is not"),
        (["--repo", "/nonexistent/skills-repo"], "BLOCKED_BAD_REPO: /nonexistent/skills-repo: no such folder"),
        (["--invoke", "never", "--repo", str(EXAMPLE_REPO)], "CONFIG_ERROR: --invoke"),
        (["--detach", "--repo", str(EXAMPLE_REPO)], "CONFIG_ERROR: --detach needs a cluster"),
        (["--threshold", "0.5", "--repo", str(EXAMPLE_REPO)], "CONFIG_ERROR: --threshold 0.5: this run has no"),
        (["--all-evals", "--repo", str(EXAMPLE_REPO)], "CONFIG_ERROR: skills named (commit-message) and --all-evals"),
    ],
    ids=["api-base", "repo", "invoke", "detach", "threshold", "all-evals"],
)
def test_the_real_run_refuses_bad_flags_before_starting_anything(
    tmp_path: Path, extra: list[str], expected: str
) -> None:
    start = time.monotonic()
    result = _real_run(tmp_path, *extra)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "KEY" not in result.stderr and "MODEL_UNAVAILABLE" not in result.stderr  # the key is not blamed
    # A refusal ends as every outcome of a run does, with its verdict on stdout; bad flags print their error alone.
    assert result.stdout == ("verdict: BLOCKED\n" if expected.startswith("BLOCKED") else "")
    assert not (tmp_path / "out").exists()
    assert time.monotonic() - start < 50  # no cluster was started and waited on


def test_threshold_is_refused_where_no_plugin_eval_suite_would_use_it() -> None:
    code, output = invoke("run", "--all-evals", "--dry-run", "--threshold", "0.5", "--repo", str(EXAMPLE_REPO))
    assert code == 2, output
    assert "CONFIG_ERROR: --threshold 0.5: this run has no Claude Code plugin eval suite" in output
    assert "--fail-under" in output  # what a corpus's pass rate is gated by instead
    assert "Plan " not in output
    plugin = ROOT / "tests" / "fixtures" / "plugin-weather"
    code, output = invoke("run", "--all-evals", "--dry-run", "--threshold", "0.5", "--repo", str(plugin))
    assert code == 0, output


def test_fail_under_beside_threshold_is_refused_where_every_corpus_is_a_plugin_suite() -> None:
    # The suite is judged by its case scores against --threshold: --fail-under would gate nothing.
    plugin = ROOT / "tests" / "fixtures" / "plugin-weather"
    args = ["run", "--all-evals", "--dry-run", "--threshold", "0.3", "--fail-under", "0.9", "--repo", str(plugin)]
    code, output = invoke(*args)
    assert code == 2, output
    assert "CONFIG_ERROR: --fail-under 0.9: every corpus of this run is a Claude Code plugin eval suite" in output
    assert "Plan " not in output
    code, output = invoke("run", "--all-evals", "--dry-run", "--fail-under", "0.9", "--repo", str(plugin))
    assert code == 0, output  # alone, it is what every case must score


def test_detach_with_a_broker_passes_the_check(redis_server: RedisServer, example_repo: Path) -> None:
    args = ["run", "commit-message", "--dry-run", "--detach", "--broker", redis_server.url]
    code, output = invoke(*args, "--repo", str(example_repo))
    assert code == 0, output


def test_every_violation_of_a_corpus_file_is_reported_at_once(example_repo: Path) -> None:
    path = example_repo / "evals" / "changelog-entry.evals.json"
    data = json.loads(path.read_text())
    data["evals"][0]["assertions"][0] = "too short"
    data["evals"][0]["files"] = ["no/such/file.md"]
    data["evals"][1]["prompt"] = "  "
    data["evals"][1]["id"] = data["evals"][0]["id"]
    path.write_text(json.dumps(data))
    code, output = invoke("validate", "changelog-entry", "--repo", str(example_repo))
    assert code == 2
    lines = [line for line in output.splitlines() if line.startswith("BLOCKED_BAD_CORPUS")]
    where = [line.split(": ")[2] for line in lines]
    # a case with an error of its own is still compared for a repeated id
    assert where == ["$.evals[0].files[0]", "$.evals[0].assertions[0]", "$.evals[1].id", "$.evals[1].prompt"], output

    code, output = invoke("run", "changelog-entry", "--dry-run", "--repo", str(example_repo))
    assert code == 2
    assert output.count("BLOCKED_BAD_CORPUS") == 4


def test_a_repeated_id_is_reported_beside_other_cases_errors(example_repo: Path) -> None:
    path = example_repo / "evals" / "changelog-entry.evals.json"
    data = json.loads(path.read_text())
    data["evals"].append({**data["evals"][0], "assertions": ["short"]})
    data["evals"].append(dict(data["evals"][1]))
    path.write_text(json.dumps(data))
    code, output = invoke("validate", "changelog-entry", "--repo", str(example_repo))
    assert code == 2
    assert "$.evals[2].assertions[0]: is 5 characters" in output
    assert "$.evals[3].id: id 2 repeats $.evals[1].id" in output


def test_dry_run_refuses_a_shard_timeout_past_the_ceiling_as_the_run_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILL_EVAL_MAX_SHARD_TIMEOUT_S", "600")
    monkeypatch.delenv("SKILL_EVAL_BROKER_URL", raising=False)
    code, output = invoke("run", "commit-message", "--dry-run", "--shard-timeout", "900", "--repo", str(EXAMPLE_REPO))
    assert code == 2, output
    assert "CONFIG_ERROR: --shard-timeout 900 exceeds SKILL_EVAL_MAX_SHARD_TIMEOUT_S" in output


def test_dry_run_reads_the_model_config_and_names_its_errors(tmp_path: Path) -> None:
    config = tmp_path / "models.toml"
    config.write_text('[models."openai/m"]\nrpm = "fast"\n')
    code, output = invoke("run", "commit-message", "--dry-run", "--config", str(config), "--repo", str(EXAMPLE_REPO))
    assert code == 2, output
    assert f'CONFIG_ERROR: {config}: models."openai/m".rpm' in output
