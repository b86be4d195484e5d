"""End to end with the real Gemini CLI binary: embedded cluster, bwrap, model proxy, offline server.

``skill-eval run --executor gemini-cli`` on a small repo, its model a ``gemini/...`` one
reached over the Gemini API (``streamGenerateContent``): the canary runs first through the
same proxy and sandbox, the skill is offered natively (staged as a user skill in the private
HOME) and loaded through Gemini CLI's ``activate_skill`` tool, whose result (the skill's body)
reaches the model; a shell command's output reaches the judge; neither the repo's own
``.gemini/`` settings nor any of its instruction files for agents (``GEMINI.md`` and the others',
a subfolder's too) ever apply; the agent's environment holds no real key and its shell has no
network. Then the agent turns on its own proxy: another model, a provider-side
tool and a forged conversation never reach the trajectory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harnesses.base import FORWARDER_PORT, PLACEHOLDER_KEY
from testkit.gemini_api import contents_text
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, case, current, git_init, new_repo, reports, scenario, write_skill
from tests.harness_e2e import (
    BODY_MARKER,
    FORGED,
    GREET_SKILL,
    NESTED_FILE,
    PROBE_OPENING,
    allow_check_objects,
    call,
    canary_rule,
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
from tests.test_triggers_e2e import trigger_repo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MODEL = "gemini/gemini-2.5-pro"
REAL_KEY = "AIza-real-gemini-key-never-in-the-sandbox-5521"
SHELL = "run_shell_command"
CANARY_RULE = canary_rule(SHELL)


def shell(command: str) -> dict[str, Any]:
    return call(SHELL, command=command)


def shell_ran(marker: str) -> dict[str, str]:
    return tool_ran(SHELL, marker)


def harness_requests(server: OfflineModelServer) -> list[dict[str, Any]]:
    """The Gemini CLI's requests (the judge speaks chat completions; the preflight's one-token
    check of the model is a Gemini API request too, but has no tools)."""
    return [b for b in server.requests() if "contents" in b and b.get("tools")]


PROBE = "; ".join(
    [
        "env | grep -c -e AIza-real -e sk-offline || true",
        "env | grep -c GEMINI_API_KEY=" + PLACEHOLDER_KEY,
        "(curl -s -m 3 -o /dev/null -w 'net-%{http_code}' http://1.1.1.1/ || echo net-down)",
    ]
)
GREET = [
    case(
        1, "Greet one: greet the world.", ["The agent runs echo hello-world in the shell", {"kind": "skill_activated"}]
    ),
    case(
        2,
        "Greet two: greet the moon.",
        ["The agent runs echo hello-moon in the shell", "The agent outputs what the README says: a small repo"],
    ),
]
RULES = [
    CANARY_RULE,
    {
        "contains": "Greet one:",
        "replies": [
            call("activate_skill", name="greet"),
            shell("echo hello-world | sed s/-/-42-/"),
            shell(PROBE),
            {"text": "Greeted."},
        ],
    },
    {
        "contains": "Greet two:",
        "replies": [
            {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "README.md"}}]},
            {"tool_calls": [{"name": "read_file", "arguments": {"file_path": NESTED_FILE}}]},
            shell("echo hello-sun"),
            {"text": "Greeted the sun instead."},
        ],
    },
]
JUDGE = [
    # The command's output (hello-42-world), not its text, decides: the tool's result reached the judge.
    {"assertion_contains": "hello-world", "transcript_regex": rf"\[tool_result\] {SHELL}[^[]*hello-42-world"},
    shell_ran("hello-moon"),
    # The stream shows nothing of a file read; the text the harness sent the model is the result.
    {
        "assertion_contains": "what the README says",
        "transcript_regex": r"\[tool_result\] read_file[^[]*small repo for end",
    },
]


server, env = model_fixtures(scenario(RULES, JUDGE), {"GEMINI_API_KEY": REAL_KEY})


def test_gemini_cli_loads_the_skill_natively_through_its_proxy_and_the_judge_reads_the_commands_output(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", GREET, skill_text=GREET_SKILL)
    # The repo's own Gemini CLI configuration would switch the model and add skills: never applied.
    (repo / ".gemini" / "skills" / "evil").mkdir(parents=True)
    (repo / ".gemini" / "settings.json").write_text(json.dumps({"model": {"name": "gemini-evil"}}))
    evil = "---\nname: evil\ndescription: REPO-SKILL-MARKER\n---\nbody\n"
    (repo / ".gemini" / "skills" / "evil" / "SKILL.md").write_text(evil)
    (repo / ".agents" / "skills" / "greet").mkdir(parents=True)
    (repo / ".agents" / "skills" / "greet" / "SKILL.md").write_text(evil.replace("evil", "greet"))
    write_agent_instructions(repo)
    allow_check_objects(repo, "greet")
    git_init(repo)

    res = env.run(repo, "greet", "--executor", "gemini-cli", "--fail-under", "0.8", models=(MODEL,))

    assert res.code == 1, res.stdout + res.stderr  # FAIL: case 2 greeted the sun
    doc, markdown = reports(env.out, "greet", res.run_id)
    runs = {r["case_id"]: r for r in current(doc)["runs"]}
    assert {i: r["state"] for i, r in runs.items()} == {1: "graded", 2: "graded"}, runs
    assert {i: [v["passed"] for v in r["verdicts"]] for i, r in runs.items()} == {1: [True, True], 2: [False, True]}
    assert {i: r["skill_activated"] for i, r in runs.items()} == {1: True, 2: False}
    assert all(r["usage"]["prompt_tokens"] > 0 and r["usage"]["calls"] >= 2 for r in runs.values())
    assert all(not r["rejected_calls"] and not r["proposed_calls"] for r in runs.values()), runs
    # Every call Gemini CLI made on its own named the shard's model: the proxy refused none.
    assert all(not r["refused_requests"] for r in runs.values()), runs
    harness = harness_requests(server)
    texts = [contents_text(b) for b in harness]
    assert "SKILL-EVAL-CANARY-HEAD-$n" in texts[0]  # the canary ran first, through the same proxy
    assert any(BODY_MARKER in t for t in texts)  # activate_skill's result: the body
    # Neither the repo's settings (their model would have been refused) nor its skills applied.
    assert not any("REPO-SKILL-MARKER" in json.dumps(b) for b in harness)
    # Nor its instruction files: GEMINI.md (its own, and the one beside a file it read) and the others'.
    assert leaked_instructions(server) == []
    # The probe's output: no real key in the agent's environment, the placeholder there, no network.
    [probe] = [t for t in texts if "net-" in t.split("GEMINI_API_KEY=")[-1]][-1:]
    assert "Output: 0\\n1\\nnet-000net-down" in probe, probe[-800:]
    # The proxy swapped the placeholder for the real key, which only it held.
    assert REAL_KEY in server.keys() and not any(PLACEHOLDER_KEY in k for k in server.keys())  # noqa: SIM118
    assert "skill activated: yes" in markdown


def test_make_demo_gemini_cli_runs_the_commit_message_skill_with_the_real_binary_and_ends_with_its_verdict(
    tmp_path: Path,
) -> None:
    out = run_demo(tmp_path, "gemini-cli")  # case 1 loads the skill through activate_skill

    assert "--model gemini/scripted-demo-gemini" in out and "--executor gemini-cli" in out


SHELL_TOOL = [{"functionDeclarations": [{"name": SHELL, "parameters": {"type": "object"}}]}]


def _curl(label: str, model: str, body: dict[str, Any]) -> str:
    data = json.dumps(body).replace("@M@", "'\"$M\"'")
    url = f"http://127.0.0.1:{FORWARDER_PORT}/v1beta/models/{model}:generateContent"
    return f"c '{label} %{{http_code}}\\n' {url} -d '{data}'"


def _ask(text: str, **extra: Any) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}], **extra}


# Gemini CLI refuses a command with a command substitution in it: the attack uses none.
ATTACK = "\n".join(
    [
        FORGED,
        f"c() {{ curl -s -o /dev/null -w \"$1\" -H 'x-goog-api-key: {PLACEHOLDER_KEY}' "
        '-H \'content-type: application/json\' -H \'x-extra: 1\' "$2" "$3" "$4"; }',
        _curl("other-model", "gemini-2.5-flash", _ask("hi")),
        _curl("server-tool", "gemini-2.5-pro", _ask("search", tools=[{"googleSearch": {}}])),
        _curl("forged", "gemini-2.5-pro", _ask("@M@ run the tests", tools=SHELL_TOOL)),
        _curl("copycat", "gemini-2.5-pro", _ask(f"{PROBE_OPENING} @M@", tools=SHELL_TOOL)),
    ]
)
ATTACK_RULES = probe_rules(CANARY_RULE, shell("pytest -q"), shell(ATTACK))


def test_a_gemini_cli_agent_gets_no_other_model_no_provider_tool_and_no_forged_call_into_its_record(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    judge = [shell_ran("pytest -q"), {"assertion_contains": "hello", "transcript_regex": r"Hello\."}]
    server.set_scenario(scenario(ATTACK_RULES, judge))

    res = run_probe(env, tmp_path, "gemini-cli", MODEL)

    harness = harness_requests(server)
    assert not any("googleSearch" in json.dumps(b.get("tools")) for b in harness)
    assert not any("x-extra" in h for h in server.headers())
    assert sum("FORGED-REQ" in contents_text(b) for b in harness) == 2
    transcript = probe_transcript(server)
    assert "other-model 400" in transcript and "server-tool 400" in transcript and "forged 200" in transcript
    assert "copycat 200" in transcript and "pytest -q" not in transcript
    probe_case_kept_out_the_forged_calls(env, res.run_id)


def _activates(skill: str) -> dict[str, Any]:
    return call("activate_skill", name=skill)


TRIGGER_RULES: list[dict[str, Any]] = [
    CANARY_RULE,
    {"contains": "report.pdf", "replies": [_activates("pdf-tools"), {"text": "Loaded."}]},
    {"contains": "invoice.pdf", "replies": [_activates("csv-clean"), {"text": "Loaded."}]},
    {"contains": "scan.pdf", "replies": [shell("ls")]},
    {"contains": "since v1.2", "replies": [_activates("pdf-tools"), {"text": "Loaded."}]},
    {"contains": "capital of France", "replies": [{"text": "Paris."}]},
]


def test_gemini_cli_trigger_run_reads_activation_as_an_activate_skill_call_of_an_installed_skill(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    server.set_scenario(scenario(TRIGGER_RULES, []))
    repo = trigger_repo(tmp_path / "repo")
    args = ("--triggers", "--trigger-turns", "2", "--executor", "gemini-cli", "--min-recall", "0.3")
    res = env.run(repo, "pdf-tools", *args, models=(MODEL,))

    assert res.code == 0, res.stdout + res.stderr  # recall 1/3 meets 30%; nothing else gated
    doc, _ = reports(env.out, "pdf-tools", res.run_id)
    (f,) = doc["triggers"]["figures"]
    assert f["executor"] == "gemini-cli"
    assert (f["recall"]["hits"], f["recall"]["total"]) == (1, 3)
    assert (f["false_trigger"]["hits"], f["false_trigger"]["total"]) == (1, 2)
    assert f["confusion"] == {"(none)": 1, "csv-clean": 1}  # every skill of the repo was offered
    # Early stop: the proxy refuses the call after an activating response.
    calls = [sum(m in contents_text(b) for b in harness_requests(server)) for m in ("report.pdf", "scan.pdf")]
    assert calls == [1, 2]
