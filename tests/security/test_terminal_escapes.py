"""Attack: names the repo, the corpus or a recording chose reach the terminal inside the CLI's lines.

A raw ESC starts a terminal escape sequence (clear the screen, retitle the window, recolour
what follows); a raw line break starts a line that passes for one of the CLI's own. Each name
below holds both; what the CLI prints holds neither, only their visible escapes.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.commands.cli import app
from schemas.trajectory import AssistantEvent, Event, ToolCallEvent, ToolResultEvent, Trajectory
from testkit.offline_server import OfflineModelServer
from tests.conftest import EXAMPLE_REPO
from tests.e2e_support import Env, case, checked_env, git_init, new_repo, ran, scenario, write_skill

FORGED = "FORGED: line"
HOSTILE = f"\x1b]0;pwned-title\x1b\\\x1b[41m\x9b2J\n{FORGED}"
"""A window title, a red background, a C1 clear screen, and a line of its own."""


def assert_inert(output: str) -> None:
    """No control sequence and no forged line; the name shown as its escapes instead."""
    assert "\x1b" not in output and "\x9b" not in output and "\r" not in output, repr(output)
    assert not any(line.lstrip().startswith(FORGED) for line in output.splitlines()), output
    assert "\\x1b]0;pwned-title" in output and f"\\n{FORGED}" in output, output


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.output


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE_REPO, root)
    return root


def test_a_corpus_file_name_in_the_dry_runs_skipped_lines_is_shown_escaped(repo: Path) -> None:
    (repo / "evals" / f"{HOSTILE}.evals.json").write_text("{not json")
    output = invoke("run", "--all-evals", "--dry-run", "--repo", str(repo))
    assert "skipped evals/\\x1b]0;pwned-title" in output
    assert_inert(output)


def test_a_corpus_or_trigger_key_in_a_bad_corpus_path_is_shown_escaped(repo: Path) -> None:
    corpus = repo / "evals" / "commit-message.evals.json"
    data = json.loads(corpus.read_text())
    data["evals"][0][HOSTILE] = 1
    corpus.write_text(json.dumps(data))
    output = invoke("validate", "--all-evals", "--repo", str(repo))
    assert "BLOCKED_BAD_CORPUS: evals/commit-message.evals.json: $.evals[0]: unexpected key(s) \\x1b]0;" in output
    assert_inert(output)
    deep: object = 1
    for _ in range(40):  # nested too deep: the path to the fault names the hostile key
        deep = {"d": deep}
    triggers = [{"query": "write the changelog entry for this fix", "should_trigger": True, "x": {HOSTILE: deep}}]
    (repo / "evals" / "changelog-entry.triggers.json").write_text(json.dumps(triggers))
    corpus.write_text(json.dumps({**data, "evals": [{k: v for k, v in data["evals"][0].items() if k != HOSTILE}]}))
    output = invoke("validate", "--all-evals", "--repo", str(repo))
    assert "BLOCKED_BAD_CORPUS: evals/changelog-entry.triggers.json: $[0].x.\\x1b]0;pwned-title" in output
    assert_inert(output)


def test_a_folder_named_by_the_caller_is_shown_escaped_in_its_config_error(repo: Path, tmp_path: Path) -> None:
    output = invoke("grade", "--trajectories", str(tmp_path / HOSTILE), "--repo", str(repo), "--judge", "openai/j")
    assert output.startswith("CONFIG_ERROR: ") and output.count("\n") == 1
    assert_inert(output)


# --- a graded run of hostile recordings: warnings, the COMPLETE block, status and report ------
SKILL = "replayed"


def _recording(case_id: int, model: str) -> str:
    events: list[Event] = [
        ToolCallEvent(call_id="c1", name="shell", arguments={"command": "echo MARK-ONE"}),
        ToolResultEvent(call_id="c1", output="done\n", exit_code=0),
        AssistantEvent(text="Finished."),
    ]
    return Trajectory(skill=SKILL, case_id=case_id, model=model, events=events).model_dump_json()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with (
        OfflineModelServer(scenario([], [ran("MARK-ONE")])) as server,
        checked_env(tmp_path / "e2e", server.base_url) as e,
    ):
        yield e


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_recorded_file_and_model_names_are_shown_escaped_by_grade_status_and_report(tmp_path: Path, env: Env) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, SKILL, [case(n, f"Run step {n}.", ["runs the shell command echo MARK-ONE"]) for n in (1, 2)])
    git_init(repo)
    recorded = tmp_path / "recorded" / SKILL
    recorded.mkdir(parents=True)
    (recorded / "case-1.json").write_text(_recording(1, f"openai/{HOSTILE}"))
    (recorded / "case-2.json").write_text(_recording(2, "recorded-exec"))
    (recorded / "\x1b[2J\x1b[Hcleared.txt").write_text("")
    (recorded / f"a\n{FORGED}\x1b[2K.txt").write_text("")

    graded = env.cli(
        "grade",
        "--trajectories",
        str(tmp_path / "recorded"),
        "--repo",
        str(repo),
        "--judge",
        "openai/judge",
        "--api-base",
        env.api_base,
        *env.place_args(),
    )
    assert graded.code == 0, graded.stdout + graded.stderr
    assert "warning: replayed/\\x1b[2J\\x1b[Hcleared.txt: ignored" in graded.stderr
    assert "leaderboard (composite): " in graded.stdout
    assert_inert(graded.stdout + graded.stderr)
    run_id = graded.run_id
    status = env.cli("status", run_id, "--store", str(env.store))
    assert status.code == 0, status.stdout + status.stderr
    assert "\x1b" not in status.stdout + status.stderr and FORGED not in status.stdout.splitlines()
    report = env.cli("report", run_id, "--store", str(env.store), "--out", str(tmp_path / "again"))
    assert report.code == 0 and "leaderboard (composite): " in report.stdout
    assert_inert(report.stdout + report.stderr)
