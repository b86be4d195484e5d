"""End to end with the real GitHub Copilot CLI binary: embedded cluster, bwrap, model proxy, offline server.

``skill-eval run --executor copilot-cli`` on a small repo, offline with a custom provider, its
model an ``openai/...`` one reached over chat completions: the canary runs first through the
same proxy and sandbox, the skill is offered natively (staged as a personal skill in the private
HOME) and loaded through its ``skill`` tool, the body reaching the model; a shell command's output
reaches the judge; the repo's own ``.github/`` skills and instructions and ``AGENTS.md`` never
apply; the agent's environment holds no real key and its shell has no network. Then the agent
turns on its own proxy: another model, a provider-side service and a forged conversation never
reach the trajectory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harnesses.base import PLACEHOLDER_KEY
from testkit.offline_server import OfflineModelServer
from testkit.scenario import message_text
from tests.e2e_support import Env, case, checked_env, current, git_init, new_repo, reports, scenario, write_skill
from tests.harness_e2e_support import BODY_MARKER, GREET_SKILL, HarnessScript

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
        "replies": [COPILOT.shell("echo hello-sun", description="run"), {"text": "Greeted the sun instead."}],
    },
]
JUDGE = [COPILOT.output_reached("hello-world", "hello-42-world"), COPILOT.shell_ran("hello-moon")]


def harness_requests(server: OfflineModelServer) -> list[dict[str, Any]]:
    """Copilot CLI's requests (the judge's carry no tools, nor does the preflight's check)."""
    return [b for b in server.requests() if b.get("tools")]


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer(scenario(RULES, JUDGE)) as s:
        yield s


@pytest.fixture
def env(tmp_path: Path, server: OfflineModelServer) -> Iterator[Env]:
    with checked_env(tmp_path / "e2e", server.base_url) as e:
        yield e


def _repo_with_own_configuration(repo: Path) -> None:
    """A repo shipping Copilot configuration that would add a skill, an agent and instructions:
    none of it may apply."""
    evil = "---\nname: evil\ndescription: REPO-SKILL-MARKER\n---\nbody\n"
    for folder in (".github/skills/evil", ".claude/skills/evil", ".agents/skills/evil"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "SKILL.md").write_text(evil)
    (repo / ".github" / "copilot-instructions.md").write_text("REPO-INSTRUCTIONS-MARKER\n")
    (repo / "AGENTS.md").write_text("REPO-AGENTS-MARKER\n")


def test_copilot_cli_loads_the_skill_natively_through_its_proxy_and_the_judge_reads_the_commands_output(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", GREET, skill_text=GREET_SKILL)
    _repo_with_own_configuration(repo)
    corpus = repo / "evals" / "greet.evals.json"
    corpus.write_text(json.dumps({**json.loads(corpus.read_text()), "extensions": ["deterministic-assertions"]}))
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
    sent = json.dumps(harness)
    for marker in ("REPO-SKILL-MARKER", "REPO-INSTRUCTIONS-MARKER", "REPO-AGENTS-MARKER"):
        assert marker not in sent, marker
    # The probe's output: no real key in the agent's environment, no network; Copilot CLI even
    # strips its provider's key (the placeholder) from its shell's environment.
    [probe] = [t for t in texts if "net-000net-down" in t][:1]
    assert "0\n0\nnet-000net-down" in probe, probe[-800:]
    assert server.keys() and not any(PLACEHOLDER_KEY in k for k in server.keys())  # noqa: SIM118
    assert "skill activated: yes" in markdown
