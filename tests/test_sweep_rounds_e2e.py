"""A sweep over the real Codex binary and the built-in agent, on the embedded cluster, offline:
a trigger run and an ``--epochs auto`` run, each harness × model pair with its own figures.

One model (Codex's), so each harness's difference is its own. In the trigger run the scripted
model answers the agent (whose skill catalogue names ``load_skill``) by loading the skill on
every positive, and Codex as in its own trigger test: the same queries route differently in
each agent, and the figures and the gate say so per pair.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, reports, scenario
from tests.harness_e2e import call, model_fixtures
from tests.test_baseline_no_skill import make_repo
from tests.test_harness_e2e import CODEX_MODEL
from tests.test_triggers_e2e import MARKERS, trigger_repo
from tests.test_triggers_harness_e2e import _codex_rules

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CODEX, AGENT = f"codex × {CODEX_MODEL}", f"agent × {CODEX_MODEL}"
SWEEP = ("--executor", "codex", "--executor", "agent")


def agent_rule(case_id: int, skill: str | None) -> dict[str, Any]:
    """The agent's answer to one query: load ``skill``, or answer without one."""
    marker = MARKERS[case_id].replace(".", r"\.")
    replies = [call("load_skill", name=skill), {"text": "(loaded)"}] if skill else [{"text": "Done."}]
    return {"regex": rf"load_skill[\s\S]*{marker}", "tools": True, "replies": replies}


AGENT_RULES = [agent_rule(1, "pdf-tools"), agent_rule(2, "pdf-tools"), agent_rule(3, "pdf-tools")]
AGENT_RULES += [agent_rule(4, None), agent_rule(5, None)]

server, env = model_fixtures(scenario([*AGENT_RULES, *_codex_rules()], []))


def test_a_trigger_sweep_gives_each_harness_model_pair_its_own_figures_and_gate(env: Env, tmp_path: Path) -> None:
    repo = trigger_repo(tmp_path / "repo")
    args = ("--triggers", "--trigger-turns", "2", *SWEEP, "--min-recall", "0.5")
    res = env.run(repo, "pdf-tools", *args, models=(CODEX_MODEL,))

    assert res.code == 1, res.stdout + res.stderr  # FAIL: Codex's recall, not the agent's
    assert f"reason: pdf-tools ({CODEX}): recall 1/3 (33.3%) is below 50%" in res.stdout
    assert f"triggers pdf-tools ({AGENT}): recall 3/3" in res.stdout
    doc, markdown = reports(env.out, "pdf-tools", res.run_id)
    figures = {f["model"]: f for f in doc["triggers"]["figures"]}
    assert list(figures) == [CODEX, AGENT]
    assert [figures[r]["executor"] for r in (CODEX, AGENT)] == ["codex", "agent"]
    codex, agent = figures[CODEX], figures[AGENT]
    assert (codex["recall"]["hits"], codex["false_trigger"]["hits"]) == (1, 1)
    assert codex["confusion"] == {"(none)": 1, "csv-clean": 1}
    assert (agent["recall"]["hits"], agent["recall"]["total"], agent["false_trigger"]["hits"]) == (3, 3, 0)
    assert f"### {CODEX}\n" in markdown and f"### {AGENT}\n" in markdown
    # A trigger query holds no assertion: the harnesses are compared by these figures, not paired.
    assert doc.get("harness_comparisons", []) == [] and "## Harnesses paired" not in markdown


AUTO = ("--epochs", "auto", "--max-epochs", "5", "--fail-under", "0.75", "--no-calibration")


def adaptive_scenario() -> dict[str, Any]:
    """Case 1 echoes every time; case 2 tosses a seeded coin between echoing and not."""
    echo = call("shell", command="echo hello")
    coin = [{"weight": 1, "reply": echo}, {"weight": 1, "reply": {"text": "Hello there!"}}]
    rules = [
        _codex_rules()[0],  # Codex's canary
        {"tools": True, "contains": "Say hello (1)", "replies": [echo, {"text": "done"}]},
        {"tools": True, "contains": "Say hello (2)", "replies": [{"pick": coin}, {"text": "done"}]},
    ]
    judge = [
        {"assertion_contains": "echo hello", "transcript_regex": r"\[tool_call\] (?:shell|exec_command)\(.*echo hello"}
    ]
    return {**scenario(rules, judge), "seed": 3}


def test_adaptive_epochs_in_a_sweep_look_at_each_pair_and_grow_both(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    server.set_scenario(adaptive_scenario())
    repo = make_repo(tmp_path / "repo", cases=2)
    res = env.run(repo, "greeter", *SWEEP, *AUTO, models=(CODEX_MODEL,))

    assert res.code in (0, 1), res.stdout + res.stderr
    assert f"adaptive epochs, look 1/2: greeter ({CODEX}) pass-rate" in res.stderr
    doc, markdown = reports(env.out, "greeter", res.run_id)
    cases = {c["case_id"]: c for c in doc["adaptive"]["cases"]}
    assert (cases[1]["epochs"], cases[1]["stopped"]) == (3, "stable")  # echoes every time, in both agents
    # The seeded coin: in its first round case 2 never echoed under Codex (stable there) and varied
    # under the agent, whose pair was undecided: so it went on, in both pairs, to --max-epochs.
    assert f"greeter ({CODEX}) pass-rate 0.500" in res.stderr and f"greeter ({AGENT}) pass-rate 0.833" in res.stderr
    assert (cases[2]["epochs"], cases[2]["stopped"]) == (5, "max-epochs")
    assert [g["row"] for g in doc["adaptive"]["gates"]] == [CODEX, AGENT]
    [current] = [v for v in doc["variants"] if v["variant"] == "current"]
    # Each pair ran every epoch the cases got: a later round's shards went to both harnesses.
    epochs = sum(c["epochs"] for c in cases.values())
    assert [(m["model"], m["shards"]) for m in current["models"]] == [(CODEX, epochs), (AGENT, epochs)]
    assert f"- gate: {CODEX}: pass-rate" in markdown
    stored = json.loads(next(Path(env.store).rglob("manifest.r*.json")).read_text())["plan"]
    assert {s["harness"] for s in stored["shards"]} == {"codex", "agent"}
