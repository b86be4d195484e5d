"""`make demo` end to end: the bundled example evaluated offline ends with its verdict, and that
verdict holds against the threshold the demo says it sets; `make demo-codex` the same with the
real Codex binary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from producer.commands.demo import AGENT_PROMPT, DEMO_THRESHOLD, EXECUTOR, HARNESS_DEMOS, OWN_PROMPTS, sweep_scenario
from testkit.model_handler import select_rule_text
from testkit.scenario import parse_scenario
from tests.e2e_support import current, reports
from tests.harness_e2e import run_demo

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_demo_passes_its_own_threshold_and_ends_with_the_verdict(tmp_path: Path) -> None:
    env = {**os.environ, "SKILL_EVAL_RUN_LOG": str(tmp_path / "runs.log"), "SKILL_EVAL_STORE": str(tmp_path / "store")}
    done = subprocess.run(
        [sys.executable, "-m", "producer.commands.demo", "--out", str(tmp_path / "reports")],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "verdict: PASS"
    assert f"threshold: {float(DEMO_THRESHOLD)} (--fail-under)" in lines
    # Honest about what it set and what failed: the scripted model fails some assertions on purpose.
    assert any("fails some assertions on purpose" in line for line in lines)
    corpora = [line for line in lines if line.startswith("skill: ")]
    assert len(corpora) == 2 and all(line.endswith("  PASS") for line in corpora), corpora
    assert any(line.startswith("failing assertions: ") for line in lines)


@pytest.mark.slow
@pytest.mark.timeout(450)
def test_make_demo_codex_runs_the_real_codex_over_the_responses_api_and_ends_with_its_verdict(
    tmp_path: Path,
) -> None:
    out = run_demo(tmp_path, "codex")

    assert "--model openai/gpt-scripted-demo" in out and "--executor codex" in out
    run_id = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("run: "))
    doc, _markdown = reports(tmp_path / "reports", "commit-message", run_id)
    runs = {r["case_id"]: r for r in current(doc)["runs"]}
    # The demo names the skill ($commit-message): Codex puts its body into the request, activated in both cases.
    assert {i: (r["state"], r["skill_activated"]) for i, r in runs.items()} == {
        1: ("graded", True),
        2: ("graded", True),
    }
    # Codex offers this model its shell and no patch tool: the file of case 2 is written by a command it ran.
    wrote = runs[2]["verdicts"][0]
    assert (
        wrote["passed"]
        and wrote["evidence"].startswith("[tool_call] exec_command(")
        and "> docs/USAGE.md" in wrote["evidence"]
    )
    assert all(not r["rejected_calls"] for r in runs.values())
    # A scripted model, named so: no real model's name, no price (its cost is unknown, not a real model's).
    usage = doc["usage"]["openai/gpt-scripted-demo"]
    assert usage["prompt_tokens"] > 0 and usage["cost_usd"] is None


def test_a_sweeps_scenario_answers_each_harness_on_a_shared_model_with_its_own_script_only() -> None:
    rules = parse_scenario(sweep_scenario(["codex", "opencode", "copilot-cli", "agent"]))
    ask = "I fixed the greeting punctuation in src/greeting.py. Please commit it."

    def answering(text: str, model: str = "gpt-scripted-demo") -> str | None:
        rule = select_rule_text(rules, model, text, True)
        return None if rule is None else rule.name

    for harness, prompt in OWN_PROMPTS.items():
        assert answering(f"{prompt}, a system prompt.\n{ask}") == f"commit-message/1 ({harness})"
    # A request in no harness's prompt gets none's script: the scenario's default answers it.
    assert answering(ask) is None
    assert answering(ask, "scripted-demo-claude") is None
    # The agent's script answers the agent's prompt whatever model it names.
    assert answering(f"tools: {AGENT_PROMPT}) ...\n{ask}", "scripted-demo-claude") is not None


def test_the_usage_doc_says_what_the_codex_demo_records_for_activation() -> None:
    """The Codex demo records the skill activated in both cases (its test above): explicit
    invocation makes Codex send the skill's body itself. The doc must not say case 2 skips it."""
    text = " ".join((ROOT / "docs" / "usage.md").read_text(encoding="utf-8").split())
    start = text.index("`make demo-claude-code` runs")
    demos = text[start : text.index("`make demo-sweep`", start)]
    same = next(s for s in demos.split(". ") if "do the same" in s)
    assert "demo-codex" not in same, same
    codex = demos[demos.index("`make demo-codex` runs") :]
    assert "activated in both cases" in codex and "body" in codex


@pytest.mark.parametrize("model", sorted({EXECUTOR, *HARNESS_DEMOS.values()}))
def test_every_demo_model_is_named_scripted_and_priced_by_no_table(model: str) -> None:
    """A stored demo run must not read as a real model's run, nor cost what a real model costs:
    the harnesses take any model name through their custom provider, so each demo names its
    scripted model so, and its turns are unpriced (the cost is unknown)."""
    from worker.models.via_litellm import token_cost

    assert "scripted-demo" in model
    assert token_cost(model, 1000, 1000) is None
    assert token_cost(model.partition("/")[2], 1000, 1000) is None  # as the harness's reply names it
