"""The CLI's harness options: executor names, --invoke, a missing binary, and the skill_activated check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from producer.corpus.validation import validate_corpus
from schemas.corpus import SkillActivatedCheck
from schemas.errors import BadCorpus
from schemas.trajectory import ToolCallEvent, Trajectory
from tests.e2e_support import Env, case, git_init, new_repo, write_skill
from worker.grading.deterministic import check_assertion


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", [case(i, f"Greet {i}.", ["The agent runs echo hello in the shell"]) for i in (1, 2, 3)])
    git_init(repo)
    return repo


def test_an_unknown_executor_stops_the_run_with_a_config_error_listing_the_known_ones(
    repo: Path, tmp_path: Path
) -> None:
    env = Env(tmp_path / "e", "http://127.0.0.1:9/v1")
    env.base.mkdir()
    res = env.run(repo, "greet", "--executor", "claude", models=("anthropic/claude-sonnet-4-5",))
    assert res.code == 2
    assert "CONFIG_ERROR: --executor: unknown executor 'claude'" in res.stderr and "claude-code" in res.stderr
    res = env.run(repo, "greet", "--invoke", "sometimes", models=("anthropic/claude-sonnet-4-5",))
    assert res.code == 2 and "--invoke" in res.stderr


def test_a_missing_harness_binary_stops_an_embedded_run_before_anything_is_enqueued(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = Env(tmp_path / "e", "http://127.0.0.1:9/v1")
    env.base.mkdir()
    original = env.env

    def with_missing_binary() -> dict[str, str]:
        return {
            **original(),
            "SKILL_EVAL_CLAUDE_CODE_BIN": str(tmp_path / "no-claude-here"),
            "SKILL_EVAL_OPENCODE_BIN": str(tmp_path / "no-opencode-here"),
            "SKILL_EVAL_GEMINI_CLI_BIN": str(tmp_path / "no-gemini-here"),
        }

    monkeypatch.setattr(env, "env", with_missing_binary)
    res = env.run(repo, "greet", "--executor", "claude-code", models=("anthropic/claude-sonnet-4-5",))
    assert res.code == 2, res.stdout + res.stderr
    assert "BLOCKED_NO_HARNESS: claude-code:" in res.stderr and "make setup" in res.stderr
    res = env.run(repo, "greet", "--executor", "opencode", models=("openai/gpt-5",))
    assert res.code == 2, res.stdout + res.stderr
    assert "BLOCKED_NO_HARNESS: opencode:" in res.stderr and "opencode-ai@1.18.33" in res.stderr
    res = env.run(repo, "greet", "--executor", "gemini-cli", models=("gemini/gemini-2.5-pro",))
    assert res.code == 2, res.stdout + res.stderr
    assert "BLOCKED_NO_HARNESS: gemini-cli:" in res.stderr and "@google/gemini-cli@0.61.0" in res.stderr
    assert not (env.out).exists()  # no report: nothing ran


def test_skill_activated_is_a_deterministic_assertion_read_from_the_trajectory(tmp_path: Path) -> None:
    data = {
        "skill_name": "greet",
        "extensions": ["deterministic-assertions"],
        "evals": [
            {
                "id": i,
                "prompt": "Greet.",
                "expected_output": "x",
                "files": [],
                "assertions": [{"kind": "skill_activated"}],
            }
            for i in (1, 2, 3)
        ],
    }
    corpus = validate_corpus(data, "evals/greet.evals.json", lambda _p: True)
    check = corpus.evals[0].assertions[0]
    assert isinstance(check, SkillActivatedCheck)
    with pytest.raises(BadCorpus):
        bad = json.loads(json.dumps(data))
        bad["evals"][0]["assertions"] = [{"kind": "skill_activated", "skill": "other"}]
        validate_corpus(bad, "evals/greet.evals.json", lambda _p: True)
    call = ToolCallEvent(call_id="1", name="Skill", arguments={"skill": "greet"})
    loaded = Trajectory(
        skill="greet", case_id=1, model="m", events=[call], executor="claude-code", skill_activated=True
    )
    verdict = check_assertion(check, loaded)
    assert verdict.passed and "Skill" in verdict.evidence
    assert not check_assertion(check, loaded.model_copy(update={"skill_activated": False})).passed
    builtin = check_assertion(check, loaded.model_copy(update={"skill_activated": None, "executor": "agent"}))
    assert not builtin.passed and "records no skill activation" in builtin.evidence
