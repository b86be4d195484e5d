"""The skill under test is its ``skills/<skill>/SKILL.md``: without one nothing is graded.

A skill whose SKILL.md is missing (or misspelled ``skill.md``) would hand the agent no skill, and
the bare model's pass rate would be reported as the skill's. ``validate`` and ``run --dry-run``
refuse it by name (``BLOCKED_BAD_REPO: skills/<skill>/SKILL.md``); with ``--all-evals`` it is one
skipped corpus and the others go on; and a worker never runs an arm given the skill without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.repo_files import read_skill
from producer.commands.cli import app
from producer.corpus.repo import Repo
from schemas.errors import BadRepo

runner = CliRunner()
MISSING = "BLOCKED_BAD_REPO: skills/commit-message/SKILL.md: does not exist"


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def misspell_skill_file(repo: Path) -> None:
    folder = repo / "skills" / "commit-message"
    (folder / "SKILL.md").rename(folder / "skill.md")


@pytest.mark.parametrize("command", [["validate"], ["run", "--dry-run"]], ids=["validate", "dry-run"])
def test_a_named_skill_without_its_skill_file_is_refused_naming_the_file(
    example_repo: Path, command: list[str]
) -> None:
    misspell_skill_file(example_repo)
    code, output = invoke(*command, "commit-message", "--repo", str(example_repo))
    assert code == 2, output
    assert MISSING in output
    assert "'skill.md' is there: the name is SKILL.md" in output  # the likely mistake, said


def test_with_all_evals_a_skill_without_its_skill_file_is_skipped_and_the_others_planned(example_repo: Path) -> None:
    (example_repo / "skills" / "commit-message" / "SKILL.md").unlink()
    code, output = invoke("validate", "--all-evals", "--repo", str(example_repo))
    assert code == 2
    assert MISSING in output and "OK evals/changelog-entry.evals.json" in output
    code, output = invoke("run", "--all-evals", "--dry-run", "--json", "--repo", str(example_repo))
    plan = json.loads(output)
    assert code == 3  # WARN, as the real run: the bad corpus is skipped
    assert [c["skill"] for c in plan["corpora"]] == ["changelog-entry"]
    assert plan["skipped"][0]["error"].startswith(MISSING)


def test_a_trigger_corpus_for_a_skill_without_its_skill_file_is_refused(example_repo: Path) -> None:
    triggers = {
        "skill_name": "commit-message",
        "triggers": [
            {"id": 1, "query": "commit my staged change", "should_trigger": True},
            {"id": 2, "query": "what time is it", "should_trigger": False},
        ],
    }
    (example_repo / "evals" / "commit-message.triggers.json").write_text(json.dumps(triggers))
    code, output = invoke("validate", "commit-message", "--repo", str(example_repo))
    assert code == 0, output
    (example_repo / "skills" / "commit-message" / "SKILL.md").unlink()
    code, output = invoke("validate", "commit-message", "--repo", str(example_repo))
    assert code == 2
    assert output.count(MISSING) == 2  # the behavioural corpus and the trigger corpus


def test_a_skill_file_that_is_a_folder_is_refused(example_repo: Path) -> None:
    path = example_repo / "skills" / "commit-message" / "SKILL.md"
    path.unlink()
    path.mkdir()
    with pytest.raises(BadRepo, match=r"skills/commit-message/SKILL.md: is not a regular file"):
        Repo(example_repo).load("evals/commit-message.evals.json")


def test_the_worker_refuses_an_arm_given_the_skill_when_its_skill_file_is_missing(tmp_path: Path) -> None:
    (tmp_path / "skills" / "greeter" / "agents").mkdir(parents=True)
    (tmp_path / "skills" / "greeter" / "agents" / "helper.md").write_text("helper")
    with pytest.raises(BadRepo, match=r"skills/greeter/SKILL.md: does not exist"):
        read_skill(tmp_path, "greeter")
    (tmp_path / "skills" / "greeter" / "SKILL.md").write_text("")  # empty is the author's choice, not absent
    assert read_skill(tmp_path, "greeter") == ("", {"helper.md": "helper"})
