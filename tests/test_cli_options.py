"""The options ``run`` and ``grade`` share are declared once, and every command takes the one error path."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import typer.main
from typer.testing import CliRunner

from producer.commands.cli import app
from producer.commands.options import Shared

runner = CliRunner()


def options(command: str) -> dict[str, Any]:
    group: Any = typer.main.get_command(app)  # typer's own vendored click: no public type to name
    return {p.name or "": p for p in group.commands[command].params}


def test_run_and_grade_take_every_shared_option_with_the_same_declaration() -> None:
    run, grade = options("run"), options("grade")
    for field in fields(Shared):
        assert run[field.name].opts == grade[field.name].opts, field.name
        assert run[field.name].default == grade[field.name].default, field.name
    assert "shared" not in run and "shared" not in grade
    assert "trajectories" in grade and "trajectories" not in run
    assert "model" in run and "model" not in grade


def test_a_shared_option_reaches_the_command(tmp_path: Path) -> None:
    """``--repo`` is shared: a bad one is refused by ``grade`` and ``run`` alike, by the same check."""
    missing = str(tmp_path / "nowhere")
    for args in (["grade", "--trajectories", "t", "--judge", "j"], ["run", "greet", "--dry-run"]):
        result = runner.invoke(app, [*args, "--repo", missing])
        assert result.exit_code == 2, result.output
        assert "nowhere" in result.output


def test_export_of_an_unknown_run_takes_the_apps_error_path(tmp_path: Path) -> None:
    for args in (["export", "20260101-000000-00000000"], ["assertions", "20260101-000000-00000000"]):
        result = runner.invoke(app, [*args, "--store", str(tmp_path / "store")])
        assert result.exit_code == 2, result.output
        assert result.output.count("BLOCKED") + result.output.count("ERROR") == 1, result.output
    result = runner.invoke(app, ["export", "r", "--format", "csv", "--store", str(tmp_path / "store")])
    assert result.exit_code == 2 and "ERROR: --format 'csv'" in result.output


def test_help_shows_no_source_markup() -> None:
    """Docstrings become ``--help`` text as written: reST's double backticks would be shown raw."""
    group: Any = typer.main.get_command(app)
    for name in ["", *group.commands]:
        shown = runner.invoke(app, [name, "--help"] if name else ["--help"]).output
        assert "``" not in shown, name


def test_each_commands_summary_in_the_top_level_help_is_one_unbroken_sentence() -> None:
    """``skill-eval --help`` lists a command by its docstring's first paragraph, line breaks kept:
    that paragraph must be one line, or the listing breaks mid-sentence."""
    group: Any = typer.main.get_command(app)
    for name, command in group.commands.items():
        summary = (command.help or "").strip().split("\n\n")[0]
        assert "\n" not in summary, name


def test_option_help_says_what_unset_means_and_what_a_store_may_be() -> None:
    alpha = options("run")["regression_alpha"].help
    assert "Default: unset, any drop" in alpha
    for command in ("export", "assertions", "status", "report"):
        assert "folder or s3://" in options(command)["store"].help, command


def test_help_shows_each_default_usage_md_states_once() -> None:
    """docs/usage.md states these defaults; ``--help`` shows each as ``[default: X]``, and says it once
    (a help text that also writes "(default: X)" would print it twice)."""
    stated = [
        ("run", "--workers", "8"),
        ("grade", "--workers", "8"),
        ("worker", "--concurrency", "8"),
        ("run", "--out", "zuvo/reports"),
        ("grade", "--out", "zuvo/reports"),
        ("run", "--invoke", "explicit"),
        ("run", "--epochs", "1"),
        ("label", "--judge", "combined"),
    ]
    usage = (Path(__file__).resolve().parents[1] / "docs" / "usage.md").read_text()
    assert "`--workers` (`run`, `grade`; default 8) and `--concurrency` (`worker`; default 8)" in usage
    for command, flag, default in stated:
        shown = " ".join(runner.invoke(app, [command, "--help"]).output.replace("│", " ").split())
        row = re.search(rf"(?<![\w-]){re.escape(flag)}(?:,\S+)? [A-Z]", shown)  # the option's row, not a mention
        assert row is not None, (command, flag, shown)
        after = re.search(r" --[a-z][\w-]*(?:,\S+)? [A-Z]", shown[row.end() :])  # the next option's row
        line = shown[row.start() : row.end() + after.start()] if after else shown[row.start() :]
        assert f"[default: {default}" in line, (command, flag, line)
        assert line.lower().count("default") == 1, (command, flag, line)
