"""A skill, ``--model``, ``--executor`` or ``--judge`` named twice, an option of one value (``--baseline``,
``--compare``, ...) given twice, or skills beside ``--all-evals``: refused by name.

A name given twice would plan every one of its shards twice under the same id; results are
counted per id, so the run would wait forever for the second copy. A judge named twice would sit
on the panel twice and agree with itself (its calibration and labels are kept by name). ``validate``,
``--dry-run``, the real run and ``grade`` refuse it (exit 2, ``CONFIG_ERROR``) before anything runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.commands.cli import app
from tests.e2e_support import Env, case, git_init, new_repo, write_skill
from tests.harness_e2e import model_fixtures

server, env = model_fixtures({"rules": []})

MODELS = ["--model", "openai/m", "--judge", "openai/j"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["validate", "commit-message", "commit-message"], "skill commit-message given more than once"),
        (["validate", "commit-message", "--model", "openai/m", "--model", "openai/m"], "--model openai/m given"),
        (["run", "commit-message", "commit-message", "--dry-run", *MODELS], "skill commit-message given"),
        (["run", "commit-message", "--dry-run", "--model", "openai/x", *MODELS], None),
        (["run", "commit-message", "--dry-run", "--model", "openai/m", *MODELS], "--model openai/m given"),
        (["run", "commit-message", "--dry-run", "--executor", "agent", "--executor", "agent"], "--executor agent"),
        (["run", "commit-message", "--all-evals", "--dry-run"], "skills named (commit-message) and --all-evals"),
        (["validate", "commit-message", "--all-evals"], "skills named (commit-message) and --all-evals"),
        (["grade", "commit-message", "commit-message", "--trajectories", "t", "--judge", "openai/j"], "skill commit"),
        (["run", "commit-message", "--dry-run", *MODELS, "--judge", "openai/j"], "--judge openai/j given more than"),
        (["grade", "--trajectories", "t", "--judge", "openai/j", "--judge", "openai/j"], "--judge openai/j given"),
        (["grade", "--trajectories", "t", "--judge", "notamodel"], "--judge notamodel: litellm cannot tell"),
        (
            ["run", "commit-message", "--dry-run", *MODELS, "--baseline", "no-skill", "--baseline", "same"],
            "--baseline given more than once ('no-skill', 'same'): it takes one value",
        ),
        (
            ["run", "commit-message", *MODELS, "--compare", "HEAD", "--compare=HEAD~1"],
            "--compare given more than once ('HEAD', 'HEAD~1')",
        ),
        (
            ["run", "commit-message", "--dry-run", "--epochs", "2", "--runs", "3"],
            "--epochs/--runs given more than once ('2', '3')",
        ),
        (["validate", "commit-message", "--repo", "."], "--repo given more than once"),
        (["grade", "--trajectories", "t", "--trajectories", "u", "--judge", "openai/j"], "--trajectories given"),
    ],
    ids=[
        "validate-skill",
        "validate-model",
        "dry-run-skill",
        "dry-run-two-models",
        "dry-run-model",
        "dry-run-executor",
        "dry-run-all-evals",
        "validate-all-evals",
        "grade-skill",
        "dry-run-judge",
        "grade-judge",
        "grade-judge-spelling",
        "dry-run-baseline",
        "run-compare",
        "dry-run-epochs-alias",
        "validate-repo",
        "grade-trajectories",
    ],
)
def test_validate_and_dry_run_refuse_a_name_given_twice(
    args: list[str], expected: str | None, example_repo: Path
) -> None:
    result = CliRunner().invoke(app, [*args, "--repo", str(example_repo)])  # a git checkout: no fixture guard
    if expected is None:  # two different models are a plan of two rows, not a repeat
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 2, result.output
    assert f"CONFIG_ERROR: {expected}" in result.output
    assert "Plan " not in result.output


def _repo(tmp_path: Path) -> Path:
    repo = new_repo(tmp_path / "repo")
    cases = [case(1, "Say hello.", ["The agent runs echo hello in the shell"])]
    cases.append(case(2, "Say bye.", ["The agent runs echo bye in the shell"]))
    write_skill(repo, "greeter", cases)
    git_init(repo)
    return repo


@pytest.mark.parametrize(
    ("skills", "models", "expected"),
    [
        (("greeter", "greeter"), ("openai/exec-a",), "CONFIG_ERROR: skill greeter given more than once"),
        (("greeter",), ("openai/exec-a", "openai/exec-a"), "CONFIG_ERROR: --model openai/exec-a given more than once"),
    ],
    ids=["skill", "model"],
)
def test_the_real_run_refuses_a_name_given_twice_instead_of_waiting_forever(
    env: Env, tmp_path: Path, skills: tuple[str, ...], models: tuple[str, ...], expected: str
) -> None:
    # Before the refusal this run planned each shard twice and waited for results that never come:
    # the timeout makes such a run fail here rather than hang.
    res = env.cli(*env.run_args(_repo(tmp_path), *skills, models=models), timeout_s=60)
    assert res.code == 2, res.stderr
    assert expected in res.stderr
    assert not env.out.exists() and not env.store.exists()  # nothing planned was stored or reported
