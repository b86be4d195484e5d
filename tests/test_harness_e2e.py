"""End to end with the real Claude Code binary: embedded cluster, bwrap, model proxy, offline server.

``skill-eval run --executor claude-code`` on a small repo: the canary runs first through the
same proxy and sandbox, every case runs the real ``claude`` as a throwaway uid whose only
way out is its proxy, the judge grades the trajectories the proxy's record vouches for, and
the report carries tokens, cost and whether the skill was activated. The repo's instruction
files for agents (``CLAUDE.md``, ``AGENTS.md`` and the others', a subfolder's too) never enter
either harness's prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, case, current, git_init, new_repo, reports, scenario, write_skill
from tests.harness_e2e import (
    NESTED_FILE,
    allow_check_objects,
    call,
    canary_rule,
    leaked_instructions,
    model_fixtures,
    tool_ran,
    write_agent_instructions,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MODEL = "anthropic/claude-sonnet-4-5"
SKILL_TEXT = (
    "---\nname: greet\ndescription: Greets things by writing hello-<thing> with echo.\n---\n"
    "# greet\n\nRun echo hello-<thing>.\n"
)
CANARY_RULE = canary_rule("Bash")


def bash(command: str) -> dict[str, Any]:
    return call("Bash", command=command, description="run")


def skill_call(name: str) -> dict[str, Any]:
    return call("Skill", skill=name)


def bash_ran(marker: str) -> dict[str, str]:
    return tool_ran("Bash", marker)


GREET = [
    case(
        1, "Greet one: greet the world.", ["The agent runs echo hello-world in the shell", {"kind": "skill_activated"}]
    ),
    case(2, "Greet two: greet the moon.", ["The agent runs echo hello-moon in the shell", {"kind": "skill_activated"}]),
    case(3, "Greet three: greet the sea.", ["The agent runs echo hello-sea in the shell"]),
]
RULES = [
    CANARY_RULE,
    {
        "contains": "Greet one:",
        "replies": [skill_call("greet"), bash("echo hello-world > greeting.txt"), {"text": "Greeted."}],
    },
    {
        "contains": "Greet two:",
        "replies": [call("Read", file_path=NESTED_FILE), bash("echo hello-sun"), {"text": "Greeted the sun instead."}],
    },
    {"contains": "Greet three:", "replies": [bash("echo hello-sea"), {"text": "Greeted."}]},
]
JUDGE = [bash_ran(m) for m in ("hello-world", "hello-moon", "hello-sea")]


server, env = model_fixtures(scenario(RULES, JUDGE))


def test_claude_code_runs_each_case_through_its_proxy_and_the_report_grades_it_with_tokens_cost_and_activation(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", GREET, skill_text=SKILL_TEXT)
    write_agent_instructions(repo)
    allow_check_objects(repo, "greet")
    git_init(repo)

    res = env.run(repo, "greet", "--executor", "claude-code", "--fail-under", "0.8", models=(MODEL,))

    assert res.code == 1, res.stdout + res.stderr  # FAIL: case 2 greeted the wrong thing, without the skill
    doc, markdown = reports(env.out, "greet", res.run_id)
    runs = {r["case_id"]: r for r in current(doc)["runs"]}
    assert {i: r["state"] for i, r in runs.items()} == {1: "graded", 2: "graded", 3: "graded"}
    passed = {i: [v["passed"] for v in r["verdicts"]] for i, r in runs.items()}
    assert passed == {1: [True, True], 2: [False, False], 3: [True]}
    # Activation is recorded per case: the Skill tool call in case 1, none in cases 2 and 3.
    assert {i: r["skill_activated"] for i, r in runs.items()} == {1: True, 2: False, 3: False}
    assert "skill activated: yes" in markdown and "skill activated: no" in markdown
    # Tokens and cost come from the proxy's record of the real claude's requests.
    assert all(r["usage"]["prompt_tokens"] > 0 and r["usage"]["calls"] >= 2 for r in runs.values())
    assert doc["usage"][MODEL]["cost_usd"] > 0
    # The canary ran first, through the same proxy: its command came back as a Bash call.
    messages = [str(b.get("messages")) for b in server.requests() if b.get("model") == "claude-sonnet-4-5"]
    assert "SKILL-EVAL-CANARY-HEAD-$n" in messages[0]
    assert all(not r["rejected_calls"] for r in runs.values())
    # The repo's instruction files (CLAUDE.md and the others', and lib/'s beside the file case 2
    # read) reached no request: the harness never put them into its prompt.
    assert leaked_instructions(server) == []


CODEX_MODEL = "openai/gpt-5-codex"


def shell(command: str) -> dict[str, Any]:
    return call("shell", command=command)


def shell_ran(marker: str) -> dict[str, str]:
    return tool_ran("exec_command", marker)


CODEX_RULES = [
    canary_rule("shell", described=False),
    {"contains": "Greet one:", "replies": [shell("echo hello-world > greeting.txt"), {"text": "Greeted."}]},
    {
        "contains": "Greet two:",
        "replies": [shell(f"cat {NESTED_FILE}"), shell("echo hello-sun"), {"text": "Greeted the sun instead."}],
    },
    {"contains": "Greet three:", "replies": [shell("echo hello-sea"), {"text": "Greeted."}]},
]


def test_codex_runs_each_case_through_the_responses_api_behind_its_proxy_and_is_graded_like_any_executor(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    server.set_scenario(scenario(CODEX_RULES, [shell_ran(m) for m in ("hello-world", "hello-moon", "hello-sea")]))
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", GREET, skill_text=SKILL_TEXT)
    write_agent_instructions(repo)
    (repo / ".agents" / "skills" / "evil").mkdir(parents=True)
    (repo / ".agents" / "skills" / "evil" / "SKILL.md").write_text(
        "---\nname: evil\ndescription: REPO-SKILL-MARKER\n---\nbody\n"
    )
    (repo / ".codex").mkdir()
    (repo / ".codex" / "config.toml").write_text('developer_instructions = "REPO-CODEX-CONFIG-MARKER"\n')
    allow_check_objects(repo, "greet")
    git_init(repo)

    res = env.run(repo, "greet", "--executor", "codex", "--fail-under", "0.9", models=(CODEX_MODEL,))

    assert res.code == 1, res.stdout + res.stderr
    doc, _markdown = reports(env.out, "greet", res.run_id)
    runs = {r["case_id"]: r for r in current(doc)["runs"]}
    passed = {i: [v["passed"] for v in r["verdicts"]] for i, r in runs.items()}
    # Explicit invocation ($greet) puts the skill's body into the request: activated in every case.
    assert passed == {1: [True, True], 2: [False, True], 3: [True]}
    assert all(r["skill_activated"] is True for r in runs.values())
    assert doc["usage"][CODEX_MODEL]["prompt_tokens"] > 0
    assert all(k.startswith("Bearer ") for k in server.keys())  # noqa: SIM118  (not a dict)
    assert leaked_instructions(server) == []  # AGENTS.md, AGENTS.override.md and the others' never applied
    sent = json.dumps(server.requests())
    assert "REPO-SKILL-MARKER" not in sent and "REPO-CODEX-CONFIG-MARKER" not in sent
