"""A model name litellm could not route is refused by ``validate --model``, ``--dry-run`` and ``run``,
with how to spell one, before any worker's model check would name it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.litellm_table import bundled_model_table
from producer.commands.cli import app
from producer.plan.model_names import check_model_names
from schemas.errors import ConfigError
from tests.conftest import EXAMPLE_REPO

REPO = ["--repo", str(EXAMPLE_REPO)]
SPELLING = "name it <provider>/<model> as litellm does"


def never(model: str) -> bool:
    return False


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "commit-message", "--model", "notamodel"],
        ["run", "commit-message", "--dry-run", "--model", "notamodel"],
        ["run", "commit-message", "--model", "notamodel", "--judge", "openai/j"],
    ],
    ids=["validate", "dry-run", "run"],
)
def test_a_model_without_a_provider_litellm_knows_is_refused_saying_how_to_spell_one(args: list[str]) -> None:
    result = CliRunner().invoke(app, [*args, *REPO])
    assert result.exit_code == 2, result.output
    assert f"CONFIG_ERROR: --model notamodel: litellm cannot tell which provider serves it; {SPELLING}" in result.output
    assert "openai/<name> for an OpenAI-compatible server at --api-base" in result.output
    assert "Plan " not in result.output


def test_a_judge_is_checked_too() -> None:
    args = ["run", "commit-message", "--dry-run", "--model", "openai/m", "--judge", "notajudge", *REPO]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "CONFIG_ERROR: --judge notajudge: litellm cannot tell" in result.output


@pytest.mark.parametrize(
    "extra",
    [
        ["--model", "openai/scripted-demo-executor", "--judge", "openai/j", "--api-base", "http://127.0.0.1:9/v1"],
        ["--model", "gpt-4o", "--judge", "anthropic/claude-sonnet-4-5"],  # litellm's table names its provider
        ["--model", "notamodel", "--executor", "cmd:my-agent --print"],  # an external agent calls its own model
        ["--model", "someprovider/whatever"],  # a prefix is the workers' model check's to judge
    ],
    ids=["demo", "bare-name-litellm-lists", "cmd-executor", "any-prefix"],
)
def test_names_litellm_can_route_are_accepted(extra: list[str], example_repo: Path) -> None:
    # A git checkout: the demo's base fixtures need one, and a dry run refuses them without it.
    result = CliRunner().invoke(app, ["run", "commit-message", "--dry-run", *extra, "--repo", str(example_repo)])
    assert result.exit_code == 0, result.output


def test_a_bare_name_the_model_config_sends_straight_over_http_is_accepted(tmp_path: Path, example_repo: Path) -> None:
    config = tmp_path / "models.toml"
    config.write_text('[models.my-local-model]\ntransport = "direct"\napi_base = "http://127.0.0.1:9/v1"\n')
    args = ["run", "commit-message", "--dry-run", "--model", "my-local-model", "--config", str(config)]
    args += ["--repo", str(example_repo)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


def test_the_check_reads_litellms_table_and_checks_nothing_without_it() -> None:
    assert "gpt-4o" in bundled_model_table()
    with pytest.raises(ConfigError, match="--model notamodel"):
        check_model_names(["agent"], ["notamodel"], [], bundled_model_table(), never)
    check_model_names(["agent"], ["notamodel"], [], {}, never)  # litellm's table not found: no refusal
    check_model_names(["claude-code"], ["notamodel"], [], {"x"}, never)  # a harness refuses it on its own
