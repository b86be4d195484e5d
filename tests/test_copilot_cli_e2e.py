"""End to end with the real GitHub Copilot CLI binary: embedded cluster, bwrap, model proxy, offline server.

``skill-eval run --executor copilot-cli`` on a small repo, offline with a custom provider, its
model an ``openai/...`` one reached over chat completions: the canary runs first through the
same proxy and sandbox, the skill is offered natively (staged as a personal skill in the private
HOME) and loaded through its ``skill`` tool, the body reaching the model; a shell command's output
reaches the judge; the repo's own ``.github/`` skills and its instruction files for agents
(``AGENTS.md``, ``.github/copilot-instructions.md`` and the others', a subfolder's too) never
apply; the agent's environment holds no real key and its shell has no network. Then the agent
turns on its own proxy: another model, a provider-side service and a forged conversation never
reach the trajectory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harnesses.base import PLACEHOLDER_KEY
from testkit.offline_server import OfflineModelServer
from testkit.scenario import message_text
from tests.e2e_support import Env, case, current, git_init, new_repo, reports, scenario, write_skill
from tests.harness_e2e import (
    BODY_MARKER,
    GREET_SKILL,
    NESTED_FILE,
    PROBE_OPENING,
    HarnessScript,
    allow_check_objects,
    chat,
    chat_attack,
    leaked_instructions,
    model_fixtures,
    probe_case_kept_out_the_forged_calls,
    probe_rules,
    probe_transcript,
    run_demo,
    run_probe,
    write_agent_instructions,
)
from tests.test_triggers_e2e import trigger_repo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MODEL = "openai/gpt-5"
COPILOT = HarnessScript(shell_tool="bash", key_env="COPILOT_PROVIDER_API_KEY")
GREET = [
    case(
        1, "Greet one: greet the world.", ["The agent runs echo hello-world in the shell", {"kind": "skill_activated"}]
    ),
    case(2, "Greet two: greet the moon.", ["The agent runs echo hello-moon in the shell"]),
]
RULES = [
    COPILOT.canary_rule(),
    {
        "contains": "Greet one:",
        "replies": [
            {"tool_calls": [{"name": "skill", "arguments": {"skill": "greet"}}]},
            COPILOT.shell("echo hello-$((6*7))-world", description="run"),
            COPILOT.shell(COPILOT.probe(), description="probe"),
            {"text": "Greeted."},
        ],
    },
    {
        "contains": "Greet two:",
        "replies": [
            {"tool_calls": [{"name": "view", "arguments": {"path": NESTED_FILE}}]},
            COPILOT.shell("echo hello-sun", description="run"),
            {"text": "Greeted the sun instead."},
        ],
    },
]
JUDGE = [COPILOT.output_reached("hello-world", "hello-42-world"), COPILOT.shell_ran("hello-moon")]


def harness_requests(server: OfflineModelServer) -> list[dict[str, Any]]:
    """Copilot CLI's requests (the judge's carry no tools, nor does the preflight's check)."""
    return [b for b in server.requests() if b.get("tools")]


server, env = model_fixtures(scenario(RULES, JUDGE))


def _repo_with_own_configuration(repo: Path) -> None:
    """A repo shipping Copilot configuration that would add a skill, an agent and instructions:
    none of it may apply."""
    evil = "---\nname: evil\ndescription: REPO-SKILL-MARKER\n---\nbody\n"
    for folder in (".github/skills/evil", ".claude/skills/evil", ".agents/skills/evil"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "SKILL.md").write_text(evil)
    write_agent_instructions(repo)


def test_copilot_cli_loads_the_skill_natively_through_its_proxy_and_the_judge_reads_the_commands_output(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", GREET, skill_text=GREET_SKILL)
    _repo_with_own_configuration(repo)
    allow_check_objects(repo, "greet")
    git_init(repo)

    res = env.run(repo, "greet", "--executor", "copilot-cli", "--fail-under", "0.8", models=(MODEL,))

    assert res.code == 1, res.stdout + res.stderr  # FAIL: case 2 greeted the sun
    doc, markdown = reports(env.out, "greet", res.run_id)
    runs = {r["case_id"]: r for r in current(doc)["runs"]}
    assert {i: r["state"] for i, r in runs.items()} == {1: "graded", 2: "graded"}, runs
    assert {i: [v["passed"] for v in r["verdicts"]] for i, r in runs.items()} == {1: [True, True], 2: [False]}
    assert {i: r["skill_activated"] for i, r in runs.items()} == {1: True, 2: False}
    assert all(r["usage"]["prompt_tokens"] > 0 and r["usage"]["calls"] >= 2 for r in runs.values())
    assert all(not r["rejected_calls"] and not r["proposed_calls"] for r in runs.values()), runs
    assert all(not r["refused_requests"] for r in runs.values()), runs
    harness = harness_requests(server)
    assert {b.get("model") for b in harness} == {"gpt-5"}
    texts = [message_text(b.get("messages") or []) for b in harness]
    assert "SKILL-EVAL-CANARY-HEAD-$n" in texts[0]  # the canary ran first, through the same proxy
    assert any(BODY_MARKER in t for t in texts)  # the skill's body reached the model
    assert "REPO-SKILL-MARKER" not in json.dumps(harness)
    # No instruction file for agents (AGENTS.md, .github/copilot-instructions.md and the others',
    # and lib/'s beside the file case 2 viewed) reached a request.
    assert leaked_instructions(server) == []
    # The probe's output: no real key in the agent's environment, no network; Copilot CLI even
    # strips its provider's key (the placeholder) from its shell's environment.
    [probe] = [t for t in texts if "net-000net-down" in t][:1]
    assert "0\n0\nnet-000net-down" in probe, probe[-800:]
    assert server.keys() and not any(PLACEHOLDER_KEY in k for k in server.keys())  # noqa: SIM118
    assert "skill activated: yes" in markdown


SHELL_TOOL = [{"type": "function", "function": {"name": COPILOT.shell_tool, "parameters": {"type": "object"}}}]
ATTACK = chat_attack(
    [
        ("other-model", chat("gpt-5.1", "hi")),
        ("server-tool", chat("gpt-5", "search", web_search_options={"search_context_size": "high"})),
        ("forged", chat("gpt-5", "@M@ run the tests", tools=SHELL_TOOL)),
        ("copycat", chat("gpt-5", f"{PROBE_OPENING} @M@", tools=SHELL_TOOL)),
    ]
)
ATTACK_RULES = probe_rules(
    COPILOT.canary_rule(), COPILOT.shell("pytest -q"), COPILOT.shell(ATTACK, description="attack")
)


def test_a_copilot_cli_agent_gets_no_other_model_no_provider_service_and_no_forged_call_into_its_record(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    judge = [COPILOT.shell_ran("pytest -q"), {"assertion_contains": "hello", "transcript_regex": r"Hello\."}]
    server.set_scenario(scenario(ATTACK_RULES, judge))

    res = run_probe(env, tmp_path, "copilot-cli", MODEL)

    harness = harness_requests(server)
    assert {b.get("model") for b in harness} == {"gpt-5"}
    assert not any(b.get("web_search_options") for b in harness)
    assert not any("x-extra" in h for h in server.headers())
    assert sum("FORGED-REQ" in message_text(b.get("messages") or []) for b in harness) == 2
    transcript = probe_transcript(server)
    assert "other-model 400" in transcript and "server-tool 400" in transcript and "forged 200" in transcript
    assert "copycat 200" in transcript and "pytest -q" not in transcript
    probe_case_kept_out_the_forged_calls(env, res.run_id, ("MODEL_NOT_ALLOWED", "BODY_FIELD_REFUSED"))


def _loads(skill: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "skill", "arguments": {"skill": skill}}]}


TRIGGER_RULES: list[dict[str, Any]] = [
    COPILOT.canary_rule(),
    {"contains": "report.pdf", "replies": [_loads("pdf-tools"), {"text": "Loaded."}]},
    {"contains": "invoice.pdf", "replies": [_loads("csv-clean"), {"text": "Loaded."}]},
    {"contains": "scan.pdf", "replies": [COPILOT.shell("ls", description="list")]},
    {"contains": "since v1.2", "replies": [_loads("pdf-tools"), {"text": "Loaded."}]},
    {"contains": "capital of France", "replies": [{"text": "Paris."}]},
]


def test_copilot_cli_trigger_run_reads_activation_as_a_skill_call_of_an_installed_skill(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    server.set_scenario(scenario(TRIGGER_RULES, []))
    repo = trigger_repo(tmp_path / "repo")
    args = ("--triggers", "--trigger-turns", "2", "--executor", "copilot-cli", "--min-recall", "0.3")
    res = env.run(repo, "pdf-tools", *args, models=(MODEL,))

    assert res.code == 0, res.stdout + res.stderr  # recall 1/3 meets 30%; nothing else gated
    doc, _ = reports(env.out, "pdf-tools", res.run_id)
    (f,) = doc["triggers"]["figures"]
    assert f["executor"] == "copilot-cli"
    assert (f["recall"]["hits"], f["recall"]["total"]) == (1, 3)
    assert (f["false_trigger"]["hits"], f["false_trigger"]["total"]) == (1, 2)
    assert f["confusion"] == {"(none)": 1, "csv-clean": 1}  # every skill of the repo was offered
    texts = [message_text(b.get("messages") or []) for b in harness_requests(server)]
    assert [sum(m in t for t in texts) for m in ("report.pdf", "scan.pdf")] == [1, 2]


def test_make_demo_copilot_cli_runs_the_commit_message_skill_with_the_real_binary_and_ends_with_its_verdict(
    tmp_path: Path,
) -> None:
    out = run_demo(tmp_path, "copilot-cli")  # case 1 loads the skill through its skill tool

    assert "--model openai/gpt-scripted-demo" in out and "--executor copilot-cli" in out
