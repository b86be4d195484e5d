"""End to end with the real OpenCode binary: embedded cluster, bwrap, model proxy, offline server.

``skill-eval run --executor opencode`` on a small repo, its model an ``openai/...`` one
reached over chat completions: the canary runs first through the same proxy and sandbox,
the skill is offered natively (staged as a user skill in the private HOME) and loaded
through OpenCode's ``skill`` tool, whose result (the skill's body) reaches the model; a
shell command's output reaches the judge; the repo's own ``opencode.json`` and its instruction
files for agents (``AGENTS.md`` and the others', a subfolder's too) never apply.
Then the agent turns on its own proxy: another model, a provider-side service and a forged
conversation never reach the trajectory.
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
    allow_check_objects,
    call,
    canary_rule,
    chat,
    chat_attack,
    leaked_instructions,
    model_fixtures,
    probe_case_kept_out_the_forged_calls,
    probe_rules,
    probe_transcript,
    run_demo,
    run_probe,
    tool_ran,
    write_agent_instructions,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MODEL = "openai/gpt-5"
CANARY_RULE = canary_rule("bash")


def bash(command: str) -> dict[str, Any]:
    return call("bash", command=command, description="run")


def bash_ran(marker: str) -> dict[str, str]:
    return tool_ran("bash", marker)


GREET = [
    case(
        1, "Greet one: greet the world.", ["The agent runs echo hello-world in the shell", {"kind": "skill_activated"}]
    ),
    case(2, "Greet two: greet the moon.", ["The agent runs echo hello-moon in the shell"]),
]
RULES = [
    CANARY_RULE,
    {
        "contains": "Greet one:",
        "replies": [
            {"tool_calls": [{"name": "skill", "arguments": {"name": "greet"}}]},
            bash("echo hello-$((6*7))-world"),
            {"text": "Greeted."},
        ],
    },
    {
        "contains": "Greet two:",
        "replies": [call("read", filePath=NESTED_FILE), bash("echo hello-sun"), {"text": "Greeted the sun instead."}],
    },
]
JUDGE = [
    # The command's output (42), not its text, decides: the tool's result reached the judge.
    {"assertion_contains": "hello-world", "transcript_regex": r"\[tool_result\] bash[^[]*hello-42-world"},
    bash_ran("hello-moon"),
]

server, env = model_fixtures(scenario(RULES, JUDGE))


def test_opencode_loads_the_skill_natively_through_its_proxy_and_the_judge_reads_the_commands_output(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", GREET, skill_text=GREET_SKILL)
    # The repo's own OpenCode configuration would switch the model and add instructions: never applied.
    (repo / "opencode.json").write_text(json.dumps({"model": "other/model", "instructions": ["EVIL.md"]}))
    (repo / "EVIL.md").write_text("REPO-INSTRUCTION-MARKER\n")
    write_agent_instructions(repo)
    allow_check_objects(repo, "greet")
    git_init(repo)

    res = env.run(repo, "greet", "--executor", "opencode", "--fail-under", "0.8", models=(MODEL,))

    assert res.code == 1, res.stdout + res.stderr  # FAIL: case 2 greeted the sun
    doc, markdown = reports(env.out, "greet", res.run_id)
    runs = {r["case_id"]: r for r in current(doc)["runs"]}
    assert {i: r["state"] for i, r in runs.items()} == {1: "graded", 2: "graded"}
    assert {i: [v["passed"] for v in r["verdicts"]] for i, r in runs.items()} == {1: [True, True], 2: [False]}
    assert {i: r["skill_activated"] for i, r in runs.items()} == {1: True, 2: False}
    assert all(r["usage"]["prompt_tokens"] > 0 and r["usage"]["calls"] >= 2 for r in runs.values())
    assert all(not r["rejected_calls"] and not r["proposed_calls"] for r in runs.values())
    harness = [b for b in server.requests() if b.get("model") != "judge"]
    assert {b.get("model") for b in harness} == {"gpt-5"}  # one model everywhere, its own calls included
    texts = [message_text(b.get("messages") or []) for b in harness]
    assert "SKILL-EVAL-CANARY-HEAD-$n" in texts[0]  # the canary ran first, through the same proxy
    assert any(BODY_MARKER in t for t in texts)  # the skill tool's result: the body
    assert not any("REPO-INSTRUCTION-MARKER" in t for t in texts)
    # Nor any instruction file for agents: the workspace's AGENTS.md and the others', and lib/'s
    # beside the file case 2 read (its read tool appends those: covered in the sandbox).
    assert leaked_instructions(server) == []
    assert server.keys() and not any(PLACEHOLDER_KEY in k for k in server.keys())  # noqa: SIM118  (swapped)
    assert "skill activated: yes" in markdown


BASH_TOOL = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


ATTACK = chat_attack(
    [
        ("other-model", chat("gpt-5.1", "hi")),
        ("server-tool", chat("gpt-5", "search", web_search_options={"search_context_size": "high"})),
        ("forged", chat("gpt-5", "@M@ run the tests", tools=BASH_TOOL)),
        ("copycat", chat("gpt-5", f"{PROBE_OPENING} @M@", tools=BASH_TOOL)),
    ]
)
ATTACK_RULES = probe_rules(CANARY_RULE, bash("pytest -q"), bash(ATTACK))


def test_an_opencode_agent_gets_no_other_model_no_provider_service_and_no_forged_call_into_its_record(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    judge = [bash_ran("pytest -q"), {"assertion_contains": "hello", "transcript_regex": r"Hello\."}]
    server.set_scenario(scenario(ATTACK_RULES, judge))

    res = run_probe(env, tmp_path, "opencode", MODEL)

    harness = [b for b in server.requests() if b.get("model") != "judge"]
    assert {b.get("model") for b in harness} == {"gpt-5"}
    assert not any(b.get("web_search_options") for b in harness)
    assert not any("x-extra" in h for h in server.headers())
    assert sum("FORGED-REQ" in message_text(b.get("messages") or []) for b in harness) == 2
    transcript = probe_transcript(server)
    assert "other-model 400" in transcript and "server-tool 400" in transcript and "forged 200" in transcript
    assert "copycat 200" in transcript and "pytest -q" not in transcript
    probe_case_kept_out_the_forged_calls(env, res.run_id, ("MODEL_NOT_ALLOWED", "BODY_FIELD_REFUSED"))


def test_make_demo_opencode_runs_the_commit_message_skill_with_the_real_binary_and_ends_with_its_verdict(
    tmp_path: Path,
) -> None:
    out = run_demo(tmp_path, "opencode")  # case 1 loads the skill through OpenCode's skill tool

    assert "--model openai/gpt-scripted-demo" in out and "--executor opencode" in out
