"""A corpus file whose name is wrong is named by `validate`: a stem that is no skill names the
file (and the skill meant, when one is close), a skill name mistyped on the command line gets a
"did you mean", and a file under evals/ that looks like a corpus but has no name a corpus is read
by is reported instead of being skipped without a word."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from producer.commands.cli import app
from producer.plan.request import RunRequest, plan_request
from tests.e2e_support import case, git_init, new_repo, write_skill

CASES = [case(1, "Say hello.", ["The agent runs echo hello in the shell"])]
CASES.append(case(2, "Say bye.", ["The agent runs echo bye in the shell"]))


def _repo(tmp_path: Path) -> Path:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "release-note", CASES)
    return repo


def _validate(repo: Path, *args: str) -> tuple[int, str]:
    if not (repo / ".git").exists():
        git_init(repo)
    result = CliRunner().invoke(app, ["validate", *args, "--repo", str(repo)])
    return result.exit_code, result.output


def test_a_corpus_whose_stem_is_no_skill_is_named_by_its_file(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "evals" / "release-notes.triggers.json").write_text(json.dumps([{"query": "q", "should_trigger": True}]))
    shutil.copy(repo / "evals" / "release-note.evals.json", repo / "evals" / "Release_Note.evals.json")
    code, output = _validate(repo, "--all-evals")
    assert code == 2, output
    assert (
        "BLOCKED_BAD_SKILL_NAME: evals/release-notes.triggers.json: 'release-notes' has no skills/release-notes/"
        " folder; did you mean 'release-note'?" in output
    ), output
    assert "BLOCKED_BAD_SKILL_NAME: evals/Release_Note.evals.json: 'Release_Note' is not kebab-case" in output
    assert "OK evals/release-note.evals.json: 2 cases" in output


def test_a_mistyped_skill_name_gets_the_nearest_one(tmp_path: Path) -> None:
    code, output = _validate(_repo(tmp_path), "release-notes")
    assert code == 2, output
    assert "'release-notes' has no skills/release-notes/ folder; did you mean 'release-note'?" in output
    code, output = _validate(_repo(tmp_path / "far"), "changelog")
    assert code == 2 and "did you mean" not in output, output


def test_a_file_that_looks_like_a_corpus_but_is_never_read_is_named_without_blocking(tmp_path: Path) -> None:
    """A warning, exit code unchanged: a JSON file under evals/ may be a case's input, not a corpus."""
    repo = _repo(tmp_path)
    shutil.copy(repo / "evals" / "release-note.evals.json", repo / "evals" / "release-note.eval.json")
    (repo / "evals" / "release-note.trigger.yaml").write_text("- query: q\n")
    (repo / "evals" / "input.json").write_text("{}")
    write_skill(repo, "greeter", [case(1, "Hi.", ["The agent runs echo hi"], files=["evals/input.json"]), *CASES[1:]])
    for args in (["--all-evals"], ["release-note"]):
        code, output = _validate(repo, *args)
        assert code == 0, output
        assert (
            "WARNING: evals/release-note.eval.json: not read; a corpus is evals/<skill>.evals.json and a trigger"
            " corpus evals/<skill>.triggers.json (did you mean evals/release-note.evals.json?)" in output
        ), output
        assert "WARNING: evals/release-note.trigger.yaml: not read;" in output
        assert "(did you mean evals/release-note.triggers.json?)" in output
        if args == ["--all-evals"]:
            assert "input.json" not in output, output  # greeter's case reads it: an input, not a corpus


def test_a_lookalike_is_named_by_the_dry_run_and_the_run_too_and_in_subfolders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same warning on stderr from `run --dry-run` and from the run's planning, exit code
    unchanged; a lookalike in a subfolder of evals/ is named too, a plugin suite's case folder
    and mocks are not (the suite reads them), nor a file a case names."""
    repo = _repo(tmp_path)
    shutil.copy(repo / "evals" / "release-note.evals.json", repo / "evals" / "release-note.eval.json")
    (repo / "evals" / "sub").mkdir()
    shutil.copy(repo / "evals" / "release-note.evals.json", repo / "evals" / "sub" / "x.evals.json")
    (repo / "evals" / "sub" / "input.json").write_text("{}")
    for folder in ("evals/add-note", "evals/mocks/notes"):
        (repo / folder).mkdir(parents=True)
    (repo / "evals" / "add-note" / "prompt.md").write_text("Add a note.\n")
    (repo / "evals" / "add-note" / "case.yaml").write_text("graders: []\n")
    (repo / "evals" / "mocks" / "notes" / "_tools.json").write_text("[]")
    first = case(1, "Hi.", ["The agent runs echo hi"], files=["evals/sub/input.json"])
    write_skill(repo, "greeter", [first, *CASES[1:]])
    git_init(repo)
    top = "WARNING: evals/release-note.eval.json: not read; a corpus is evals/<skill>.evals.json"
    nested = "WARNING: evals/sub/x.evals.json: not read; a corpus is evals/<skill>.evals.json and a trigger corpus"
    nested += " evals/<skill>.triggers.json (did you mean evals/x.evals.json?)"

    dry = CliRunner().invoke(app, ["run", "--all-evals", "--dry-run", "--repo", str(repo), "--json"])
    assert dry.exit_code == 0, dry.output
    json.loads(dry.stdout)  # the plan alone on stdout
    warned = dry.stderr.splitlines()
    assert any(line.startswith(top) for line in warned) and nested in warned, dry.stderr
    assert not any(n in dry.stderr for n in ("input.json", "add-note", "_tools.json")), dry.stderr

    request = RunRequest(skills=[], all_evals=True, repo=repo, models=["m"], judges=["j"], out=tmp_path / "out")
    _, bundles, errors = plan_request(request, Console(file=io.StringIO()))
    assert len(bundles) == 2 and not errors
    warned = capsys.readouterr().err.splitlines()
    assert any(line.startswith(top) for line in warned) and nested in warned, warned
    assert not any(n in line for line in warned for n in ("input.json", "add-note", "_tools.json")), warned
