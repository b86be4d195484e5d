"""End to end with the real Claude Code binary: a trigger run on a plugin repo, offline.

The repo ships ``.claude-plugin/plugin.json``, so Claude Code loads it as the plugin ``zuvo`` and
knows every skill as ``zuvo:<skill>``: the scripted model calls the Skill tool by that
plugin-qualified name, and the activation must be read as the plain skill's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, reports, scenario
from tests.harness_e2e import model_fixtures
from tests.test_harness_e2e import CANARY_RULE, CODEX_MODEL, CODEX_RULES, MODEL, bash, shell, skill_call
from tests.test_triggers_e2e import calls_for, trigger_repo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

RULES: list[dict[str, Any]] = [
    CANARY_RULE,
    {"contains": "report.pdf", "replies": [skill_call("zuvo:pdf-tools"), {"text": "Loaded."}]},
    {"contains": "invoice.pdf", "replies": [skill_call("zuvo:csv-clean"), {"text": "Loaded."}]},
    {"contains": "scan.pdf", "replies": [bash("ls")]},
    {"contains": "since v1.2", "replies": [skill_call("zuvo:pdf-tools"), {"text": "Loaded."}]},
    {"contains": "capital of France", "replies": [{"text": "Paris."}]},
]


server, env = model_fixtures(scenario(RULES, []))


def test_claude_code_trigger_run_reads_plugin_qualified_skill_calls(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = trigger_repo(tmp_path / "repo", plugin="zuvo")
    args = ("--triggers", "--trigger-turns", "2", "--executor", "claude-code", "--max-false-trigger", "0.2")
    res = env.run(repo, "pdf-tools", *args, models=(MODEL,))

    assert res.code == 1, res.stdout + res.stderr  # FAIL: a false trigger on 1 of 2 negatives
    assert "false-trigger rate 1/2 (50.0%) is above 20%" in res.stdout
    doc, _ = reports(env.out, "pdf-tools", res.run_id)
    (f,) = doc["triggers"]["figures"]
    assert f["executor"] == "claude-code"
    assert (f["recall"]["hits"], f["recall"]["total"]) == (1, 3)
    assert (f["false_trigger"]["hits"], f["false_trigger"]["total"]) == (1, 2)
    assert f["confusion"] == {"(none)": 1, "csv-clean": 1}
    # Early stop: the proxy refuses the call after an activating response; a query without one runs
    # to the trigger turns (the proxy's cap), not longer.
    assert [calls_for(server, m) for m in ("report.pdf", "invoice.pdf", "since v1.2")] == [1, 1, 1]
    assert calls_for(server, "scan.pdf") == 2


def _codex_rules() -> list[dict[str, Any]]:
    def reads(skill: str) -> dict[str, Any]:
        return shell(f"cat ~/.agents/skills/{skill}/SKILL.md")

    return [
        CODEX_RULES[0],  # the canary
        {"contains": "report.pdf", "replies": [reads("pdf-tools"), {"text": "Loaded."}]},
        {"contains": "invoice.pdf", "replies": [reads("csv-clean"), {"text": "Loaded."}]},
        {"contains": "scan.pdf", "replies": [shell("ls")]},
        {"contains": "since v1.2", "replies": [reads("pdf-tools"), {"text": "Loaded."}]},
        {"contains": "capital of France", "replies": [{"text": "Paris."}]},
    ]


def test_codex_trigger_run_reads_activation_as_a_command_opening_the_skill_md(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    server.set_scenario(scenario(_codex_rules(), []))
    repo = trigger_repo(tmp_path / "repo")
    args = ("--triggers", "--trigger-turns", "2", "--executor", "codex", "--min-recall", "0.3")
    res = env.run(repo, "pdf-tools", *args, models=(CODEX_MODEL,))

    assert res.code == 0, res.stdout + res.stderr  # recall 1/3 meets 30%; nothing else gated
    assert "every trigger query ran; no trigger gate failed" in res.stdout
    doc, _ = reports(env.out, "pdf-tools", res.run_id)
    (f,) = doc["triggers"]["figures"]
    assert f["executor"] == "codex"
    assert (f["recall"]["hits"], f["recall"]["total"]) == (1, 3)
    assert (f["false_trigger"]["hits"], f["false_trigger"]["total"]) == (1, 2)
    assert f["confusion"] == {"(none)": 1, "csv-clean": 1}
    # The Responses API carries the conversation as "input".
    calls = [sum(m in json.dumps(r.get("input", "")) for r in server.requests()) for m in ("report.pdf", "scan.pdf")]
    assert calls == [1, 2]
