"""A sweep of the demo repo over every harness and its models in one run (``make demo-sweep``).

The real Claude Code, Codex, Gemini CLI, OpenCode and Copilot CLI binaries and the built-in
agent, on the embedded cluster, each in the bubblewrap sandbox behind its proxy, against the
offline test kit's scripted models (one server for all: each harness's rules answer its own model
and, where harnesses share one, its own system prompt; the agent's its own prompt). Each harness
runs the given models it can speak: Claude Code the Anthropic one, Codex, OpenCode and Copilot
CLI the OpenAI one, Gemini CLI the Gemini one, the agent all three. The report has one row per
harness × model pair, the harness × assertion matrix and the harnesses paired on the same cases.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from engine.store import open_store
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import checked_env, git_init, new_repo, reports, scenario, write_skill
from tests.test_harness_e2e import CODEX_MODEL, CODEX_RULES, GREET, RULES, SKILL_TEXT
from viewer.app import create_app

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
CLAUDE, GPT, GEMINI = "anthropic/scripted-demo-claude", "openai/gpt-scripted-demo", "gemini/scripted-demo-gemini"
HARNESSES = ("claude-code", "codex", "gemini-cli", "opencode", "copilot-cli", "agent")
ROWS = [
    f"claude-code × {CLAUDE}",
    f"codex × {GPT}",
    f"gemini-cli × {GEMINI}",
    f"opencode × {GPT}",
    f"copilot-cli × {GPT}",
    f"agent × {CLAUDE}",
    f"agent × {GPT}",
    f"agent × {GEMINI}",
]
FILE_TOOLS = {
    "claude-code": "Write",
    "codex": "exec_command",
    "gemini-cli": "write_file",
    "opencode": "apply_patch",
    "copilot-cli": "create",
    "agent": "write_file",
}
"""The tool each harness's scripted model writes docs/USAGE.md with (Codex's only one is its shell)."""


def test_a_sweep_of_the_demo_over_every_harness_and_the_agent_reports_a_harness_model_table(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "SKILL_EVAL_RUN_LOG": str(tmp_path / "runs.log"), "SKILL_EVAL_STORE": str(tmp_path / "store")}
    sweep = [arg for harness in HARNESSES for arg in ("--executor", harness)]
    done = subprocess.run(
        [sys.executable, "-m", "producer.commands.demo", *sweep, "--out", str(tmp_path / "reports")],
        capture_output=True,
        text=True,
        timeout=860,
        env=env,
        cwd=ROOT,
    )
    lines = done.stdout.splitlines()
    assert lines and lines[-1] == "verdict: PASS", done.stdout[-3000:] + done.stderr[-3000:]
    run_id = next(line.split(": ", 1)[1] for line in lines if line.startswith("run: "))
    doc, markdown = reports(tmp_path / "reports", "commit-message", run_id)
    assert doc["meta"]["executor"] == ", ".join(HARNESSES)
    [current] = [v for v in doc["variants"] if v["variant"] == "current"]
    # The harness × model table: one row per pair, every shard of each graded.
    assert [m["model"] for m in current["models"]] == ROWS
    assert all((m["graded"], m["shards"]) == (2, 2) for m in current["models"]), current["models"]
    assert "| harness × model | behavioural |" in markdown
    for row in ROWS:
        assert f"| {row} | " in markdown
    # Each harness ran its own binary against its own script, even the three on one OpenAI model:
    # the file of case 2 was written with that harness's own tool. Activation is recorded for the
    # harnesses, not the agent.
    for run in (r for r in current["runs"] if r["case_id"] == 2):
        harness = run["model"].split(" × ")[0]
        assert run["verdicts"][0]["evidence"].startswith(f"[tool_call] {FILE_TOOLS[harness]}("), run
    activated = {m["model"]: m["skill_activated"] for m in current["models"]}
    assert all(activated[row] is not None for row in ROWS[:5]) and activated[ROWS[5]] is None
    # The scripted harnesses load the skill in case 1 and skip it in case 2; the agent follows it in both.
    by_harness = {(a["case_id"], a["index"]): a["by_harness"] for a in current["assertions"]}
    assert set(by_harness[(1, 0)]) == set(HARNESSES)
    assert by_harness[(2, 0)]["agent"]["total"] == 3 and by_harness[(2, 0)]["gemini-cli"]["total"] == 1
    assert "## Harness × assertion" in markdown and "## Harnesses paired" in markdown
    # Paired on the same cases: the harnesses on the OpenAI model share it, and the agent shares a
    # model with each; Claude Code and Gemini CLI share none with any other harness.
    pairs = {(c["baseline"], c["harness"]): c for c in doc["harness_comparisons"]}
    assert set(pairs) == {(a, b) for i, a in enumerate(HARNESSES) for b in HARNESSES[i + 1 :]}
    assert all(c["kind"] == "harness" and c["cases"] == 2 for c in pairs.values())
    apart = {k for k, c in pairs.items() if "no model in common" in c["note"]}
    assert apart == {
        ("claude-code", "codex"),
        ("claude-code", "gemini-cli"),
        ("claude-code", "opencode"),
        ("claude-code", "copilot-cli"),
        ("codex", "gemini-cli"),
        ("gemini-cli", "opencode"),
        ("gemini-cli", "copilot-cli"),
    }
    assert pairs[("codex", "opencode")]["pairs"] == 2 and pairs[("claude-code", "agent")]["pairs"] == 2
    # The leaderboard and the usage are per pair too; the HTML page has the harnesses' section.
    board = next(line for line in lines if line.startswith("leaderboard (composite): "))
    assert all(row in board for row in ROWS)
    assert set(ROWS) <= set(doc["usage"])
    html = (tmp_path / "reports" / f"skill-eval-{run_id}.html").read_text(encoding="utf-8")
    assert 'id="harnesses"' in html and f"claude-code × {CLAUDE}" in html
    assert "<th>harness × model</th><th>composite</th>" in html
    # The viewer's run page: the leaderboard by harness × model, the matrix and the pairs.
    page = (
        TestClient(create_app(open_store(str(tmp_path / "store"))), base_url="http://127.0.0.1")
        .get(f"/runs/{run_id}")
        .text
    )
    assert "<th>harness × model</th>" in page and "Harness × assertion: commit-message" in page
    assert all(row in page for row in ROWS) and "Harnesses paired on the same cases" in page


def test_a_sweep_over_claude_code_and_codex_runs_each_with_its_model_and_pairs_them(tmp_path: Path) -> None:
    """Two real harnesses of two protocols in one run: each runs the one model it can speak (the
    scripted rules of each answer its own model only), and the two share no model."""
    claude = "anthropic/claude-sonnet-4-5"  # the model the scripted rules of tests/test_harness_e2e.py answer
    claude_rules = [{**r, "model": "claude-sonnet-4-5"} for r in RULES]
    codex_rules = [{**r, "model": "gpt-5-codex"} for r in CODEX_RULES]
    judge = [
        {"assertion_contains": m, "transcript_regex": rf"\[tool_call\] (?:Bash|exec_command)\(.*{re.escape(m)}"}
        for m in ("hello-world", "hello-moon", "hello-sea")
    ]
    with (
        OfflineModelServer(scenario([*claude_rules, *codex_rules], judge)) as server,
        checked_env(tmp_path / "e2e", server.base_url) as env,
    ):
        repo = new_repo(tmp_path / "repo")
        write_skill(repo, "greet", GREET, skill_text=SKILL_TEXT)
        corpus = repo / "evals" / "greet.evals.json"
        corpus.write_text(json.dumps({**json.loads(corpus.read_text()), "extensions": ["deterministic-assertions"]}))
        git_init(repo)
        sweep = ("--executor", "claude-code", "--executor", "codex", "--fail-under", "0.5")
        res = env.run(repo, "greet", *sweep, models=(claude, CODEX_MODEL))
        asked = {b.get("model") for b in server.requests() if b.get("model") != "judge"}
    assert res.code == 0, res.stdout + res.stderr
    doc, markdown = reports(env.out, "greet", res.run_id)
    [current] = [v for v in doc["variants"] if v["variant"] == "current"]
    rows = [f"claude-code × {claude}", f"codex × {CODEX_MODEL}"]
    assert [m["model"] for m in current["models"]] == rows
    assert all((m["graded"], m["shards"]) == (3, 3) for m in current["models"])
    # Both greeted the sun in case 2; Claude Code loaded the skill in case 1 only, Codex (told to
    # use it) in every case: the harness × assertion matrix says which instruction works where.
    rates = {
        (a["case_id"], a["index"]): {h: r["rate"] for h, r in a["by_harness"].items()} for a in current["assertions"]
    }
    assert rates == {
        (1, 0): {"claude-code": 1.0, "codex": 1.0},
        (1, 1): {"claude-code": 1.0, "codex": 1.0},
        (2, 0): {"claude-code": 0.0, "codex": 0.0},
        (2, 1): {"claude-code": 0.0, "codex": 1.0},
        (3, 0): {"claude-code": 1.0, "codex": 1.0},
    }
    [paired] = doc["harness_comparisons"]
    assert (paired["baseline"], paired["harness"], paired["pairs"], paired["better"]) == ("claude-code", "codex", 3, 1)
    assert "no model in common" in paired["note"]
    [activation] = [a for a in paired["assertions"] if (a["case_id"], a["index"]) == (2, 1)]
    assert (activation["better"], activation["worse"]) == (1, 0)
    assert f"| {rows[0]} | " in markdown and f"| {rows[1]} | " in markdown
    # Each harness asked for its own model: the proxy pinned each shard to its pair's.
    assert {"claude-sonnet-4-5", "gpt-5-codex"} <= asked
