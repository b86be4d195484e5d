"""Bad input on the command line is the user's to fix: a named CONFIG_ERROR naming the flag at fault
(exit 2), never an INFRA_ERROR with a raw Python exception; a health probe keeps its 0/1 contract."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.redis_server import RedisServer, free_port
from producer.commands.cli import app

runner = CliRunner()
RUN = "20260101-000000-00000000"
DEMO = str(Path(__file__).resolve().parents[1] / "examples" / "demo-repo")


def refused(args: list[str], *named: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.output.startswith("CONFIG_ERROR: "), result.output
    for text in named:
        assert text in result.output, result.output
    return result.output


@pytest.mark.parametrize("url", ["redis//oops", "http://x"])
def test_a_malformed_broker_url_is_a_config_error_naming_broker(url: str, tmp_path: Path) -> None:
    run = ["run", "commit-message", "--repo", DEMO, "--detach", "--model", "openai/x", "--judge", "openai/y"]
    refused([*run, "--broker", url], "--broker", url)
    refused(["status", RUN, "--broker", url, "--store", str(tmp_path)], "--broker", url)


def test_a_malformed_broker_url_from_the_environment_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKILL_EVAL_BROKER_URL", "http://x")
    refused(["status", RUN, "--store", str(tmp_path)], "SKILL_EVAL_BROKER_URL")


def test_an_unreachable_broker_is_named_with_its_url_and_its_password_hidden(tmp_path: Path) -> None:
    url = f"redis://u:secret@127.0.0.1:{free_port()}"
    shown = refused(["status", RUN, "--broker", url, "--store", str(tmp_path)], "--broker", "could not be reached")
    assert "127.0.0.1" in shown and "secret" not in shown


def test_a_reachable_broker_passes_the_check(redis_server: RedisServer, tmp_path: Path) -> None:
    result = runner.invoke(app, ["status", RUN, "--broker", redis_server.url, "--store", str(tmp_path)])
    assert "--broker" not in result.output and "STORE_ERROR" in result.output  # the run, not the broker


def test_worker_health_with_the_broker_down_exits_1_as_its_help_says(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}"
    result = runner.invoke(app, ["worker", "--health", "--name", "n1", "--broker", url, "--store", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "n1: the broker" in result.output and "could not be reached" in result.output


def test_an_out_that_is_a_file_is_a_config_error_naming_out(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    store = ["--store", str(tmp_path / "store")]
    refused(["report", RUN, "--out", str(afile), *store], "--out", str(afile))
    refused(["report", RUN, "--out", str(afile / "below"), *store], "--out", "is a file")
    refused(["export", RUN, "--out", str(afile), *store], "--out", str(afile))
    run = ["run", "commit-message", "--repo", DEMO, "--model", "openai/x", "--judge", "openai/y", "--dry-run"]
    refused([*run, "--out", str(afile)], "--out", str(afile))


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("SKILL_EVAL_LEASE_TTL_S", "abc", "'abc' is not a number"),
        ("SKILL_EVAL_REAPER_PERIOD_S", "inf", "'inf' is not a finite number"),
        ("SKILL_EVAL_WORKER_PROCESSES", "0", "'0' must be at least 1"),
        ("SKILL_EVAL_SANDBOX", "\x1b[2J\u009b", "'\\x1b[2J\\x9b' must be 'bwrap' or 'none'"),
        ("SKILL_EVAL_WARM", "maybe", "'maybe' is not true or false"),
        ("SKILL_EVAL_WARM_IDLE_S", "abc", "'abc' is not a number"),
        ("SKILL_EVAL_WARM_IDLE_S", "0", "'0' must be above 0"),
    ],
)
def test_a_bad_settings_variable_is_a_config_error_naming_it_on_one_line(
    variable: str, value: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    line = f"CONFIG_ERROR: {variable}: {problem}\n"
    assert refused(["status", RUN, "--store", str(tmp_path)]) == line
    assert refused(["worker", "--broker", "redis://127.0.0.1:1", "--store", str(tmp_path)]) == line
    run = ["run", "commit-message", "--repo", DEMO, "--model", "openai/x", "--judge", "openai/y", "--dry-run"]
    assert refused(run) == line


def test_a_cost_cap_on_a_model_litellm_cannot_price_is_refused_naming_each_model(tmp_path: Path) -> None:
    """Its calls' cost is unknown, so the cap would never count them: the run is refused up front
    (dry run, run, grade) and pointed at --max-tokens, instead of passing with the cap unapplied."""
    run = ["run", "commit-message", "--repo", DEMO, "--out", str(tmp_path / "out"), "--max-cost", "0.000001"]
    models = ["--model", "openai/scripted-demo-executor", "--judge", "openai/scripted-judge"]
    for args in ([*run, *models, "--dry-run"], [*run, *models]):
        refused(
            args,
            "--max-cost 1e-06: litellm has no price for models openai/scripted-demo-executor, openai/scripted-judge",
            "--max-tokens",
        )
    grade = ["grade", "--trajectories", str(tmp_path), "--repo", DEMO, "--judge", "openai/scripted-judge"]
    refused([*grade, "--max-cost", "1"], "no price for model openai/scripted-judge, so its spend cannot be counted")
    priced = ["--model", "openai/gpt-4.1", "--judge", "openai/scripted-judge", "--max-cost", "1"]
    refused([*run[:-2], *priced, "--dry-run"], "no price for model openai/scripted-judge,")
    gpt = ["--model", "openai/gpt-4.1", "--judge", "openai/gpt-4.1", "--max-cost", "1", "--dry-run"]
    result = runner.invoke(app, [*run[:-2], *gpt])  # priced: the cap applies, the plan is printed
    assert "CONFIG_ERROR" not in result.output and "Plan " in result.output, result.output
