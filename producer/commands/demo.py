"""The README's main job: a complete offline evaluation of the bundled example repo.

Starts the offline model server with the bundled *scripted* demo scenario (plainly not an
LLM: it replays tool-call scripts and judges by rules), copies examples/demo-repo into a
fresh git checkout, and runs ``skill-eval run --all-evals`` against it through the embedded
one-host cluster (private Redis + Celery workers + bubblewrap sandbox). Extra arguments are
passed to ``skill-eval run``. Exit code: the run's verdict. The scripted model fails a few
assertions on purpose, so the demo passes ``--fail-under 0.6`` (unless given its own).

``--executor claude-code`` runs the real Claude Code binary instead (``make setup`` installs
it) on the commit-message skill, against the scripted Anthropic-API demo model
(``testkit/scenarios/demo-claude-code.json``), through the model proxy in the sandbox;
``--executor codex`` the real Codex over the Responses API (``testkit/scenarios/demo-codex.json``);
``--executor opencode`` the real OpenCode binary the same way, over chat completions
(``testkit/scenarios/demo-opencode.json``); ``--executor gemini-cli`` the real Gemini CLI over
the Gemini API (``testkit/scenarios/demo-gemini-cli.json``); ``--executor copilot-cli``
the real GitHub Copilot CLI over chat completions (``testkit/scenarios/demo-copilot-cli.json``).

``--executor`` given several times is a sweep (``make demo-sweep``: every harness and the
agent): the commit-message skill over each harness named (and the built-in agent, when ``agent``
is one of them) and each harness's scripted model, in one run, its report a harness × model
table. One server serves them all: each harness's rules answer its own model only (and, where
harnesses share a model, only requests carrying that harness's own system prompt), and the
agent's answer only a request carrying the agent's own prompt (:func:`sweep_scenario`).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from testkit.judge import calibration_judge_rules as judge_rules
from testkit.offline_server import SCENARIO_DIR, OfflineModelServer

ROOT = Path(__file__).resolve().parents[2]  # producer/commands/demo.py -> the checkout
EXAMPLE = ROOT / "examples" / "demo-repo"
EXECUTOR = "openai/scripted-demo-executor"
JUDGE = "openai/scripted-demo-judge"


def git_copy(dest: Path) -> Path:
    """examples/demo-repo as its own git repository (base/head fixtures need git)."""
    shutil.copytree(EXAMPLE, dest)
    env = ["-c", "user.name=skill-eval demo", "-c", "user.email=demo@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "demo repo"]):
        subprocess.run(["git", *env, *args], cwd=dest, check=True)
    return dest


OPENAI_DEMO = "openai/gpt-scripted-demo"
"""Codex's, OpenCode's and Copilot CLI's scripted model. Its id starts with ``gpt-`` because OpenCode
offers such a model ``apply_patch`` (and its demo script patches); outside Codex's catalogue it is
offered Codex's shell and no patch tool, as its demo script expects."""
HARNESS_DEMOS = {
    "claude-code": "anthropic/scripted-demo-claude",
    "codex": OPENAI_DEMO,
    "opencode": OPENAI_DEMO,
    "gemini-cli": "gemini/scripted-demo-gemini",
    "copilot-cli": OPENAI_DEMO,
}
"""The real harnesses the demo runs, each with the API its scripted scenario speaks. Each model is
named scripted, no real model's name: a stored demo run must not read as a real model's, nor be
priced at a real model's rates (no price table knows these names: their cost is unknown)."""

DEMO_THRESHOLD = "0.6"
"""The demo's ``--fail-under``: its scripted model fails some assertions on purpose (to show what a
failure looks like) and passes about two thirds of each corpus, so the demo sets a threshold it
meets instead of the strict default 1.0, and says so."""


def demo_scenario(name: str = "demo") -> dict[str, Any]:
    """A bundled demo scenario plus the rules that let its scripted judge pass calibration honestly."""
    scenario: dict[str, Any] = json.loads((SCENARIO_DIR / f"{name}.json").read_text(encoding="utf-8"))
    # Calibration's rules first: its assertions are worded like the demo corpus's, and one rule must judge both.
    calibration = judge_rules()
    # A harness's shell tool is Bash, bash, run_shell_command or exec_command: the same rules judge it too.
    if name != "demo":
        calibration = [
            {
                **r,
                "transcript_regex": r["transcript_regex"].replace(
                    "shell\\(", "(?:shell|Bash|bash|run_shell_command|exec_command)\\("
                ),
            }
            for r in calibration
        ]
    scenario["judge"] = [*calibration, *scenario.get("judge", [])]
    return scenario


AGENT_PROMPT = "`shell` (runs a bash command"
"""What only the built-in agent's requests say (its prompt lists its tools so): in a sweep, the
agent's scripted rules answer it alone, whatever model it asks for."""

OWN_PROMPTS = {
    "codex": "running in the Codex CLI",
    "opencode": "You are OpenCode",
    "copilot-cli": "You are the GitHub Copilot CLI",
}
"""What each harness sharing its demo model with another says of itself in its system prompt: in a
sweep, its scripted rules answer its own requests only, not another harness's on the same model."""


def scoped(rule: dict[str, Any], marker: str) -> dict[str, Any]:
    """``rule`` answering only a request whose text holds ``marker``. Both lookaheads are anchored
    at the start: an unanchored one is tried at every offset of a long system prompt."""
    regex = r"\A(?=[\s\S]*?" + re.escape(marker) + ")"
    if rule.get("regex"):
        regex += r"(?=[\s\S]*?(?:" + rule["regex"] + "))"
    return {**rule, "regex": regex}


def sweep_scenario(executors: list[str]) -> dict[str, Any]:
    """One scenario for a sweep: each harness's demo rules scoped to its demo model (and to its own
    prompt when another harness speaks that model too), the agent's demo rules scoped to the
    agent's prompt, and every judge rule."""
    rules: list[dict[str, Any]] = []
    judge: list[dict[str, Any]] = []
    if "agent" in executors:
        rules += [scoped(r, AGENT_PROMPT) for r in demo_scenario("demo")["rules"]]
    for harness in (e for e in executors if e in HARNESS_DEMOS):
        scenario = demo_scenario(f"demo-{harness}")
        for rule in ({**r, "model": HARNESS_DEMOS[harness].partition("/")[2]} for r in scenario["rules"]):
            rules.append(scoped(rule, OWN_PROMPTS[harness]) if harness in OWN_PROMPTS else rule)
        judge += scenario["judge"]
    judge += demo_scenario("demo")["judge"] if "agent" in executors else []
    default = {"text": "(scripted demo model) no script for this request."}
    return {"rules": rules, "judge": merged_judge(judge), "default": default}


def merged_judge(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One judge rule per assertion and expectation, its pattern any of theirs: each harness names
    its tools its own way (``Bash``, ``bash``, ``shell``), and the first rule naming an assertion
    judges it. Named groups are dropped (a pattern may name each once); a match then quotes its
    first line, where each of these groups begins."""
    merged: dict[tuple[str, str], list[str]] = {}
    for rule in rules:
        pattern = str(rule["transcript_regex"]).replace("(?P<evidence>", "(")
        scoped = f"(?s:{pattern[4:]})" if pattern.startswith("(?s)") else f"(?:{pattern})"
        alternatives = merged.setdefault((str(rule["assertion_contains"]), str(rule.get("expect", "present"))), [])
        if scoped not in alternatives:
            alternatives.append(scoped)
    return [
        {"assertion_contains": text, "transcript_regex": "|".join(alternatives), "expect": expect}
        for (text, expect), alternatives in merged.items()
    ]


def demo_plan(extra: list[str]) -> tuple[list[str], list[str], dict[str, Any]]:
    """The demo's targets, its ``--model`` arguments and its scenario, from the arguments given."""
    executors = [extra[i + 1] for i, arg in enumerate(extra[:-1]) if arg == "--executor"]
    if len(executors) > 1:  # a sweep: each harness with its scripted model; the agent runs them all
        models = [HARNESS_DEMOS[e] for e in executors if e in HARNESS_DEMOS] or [EXECUTOR]
        return ["commit-message"], [a for m in dict.fromkeys(models) for a in ("--model", m)], sweep_scenario(executors)
    harness = next((h for h in HARNESS_DEMOS if h in extra and "--executor" in extra), None)
    targets, executor = (["commit-message"], HARNESS_DEMOS[harness]) if harness else (["--all-evals"], EXECUTOR)
    return targets, ["--model", executor], demo_scenario(f"demo-{harness}" if harness else "demo")


def copyable(args: list[str]) -> str:
    """The demo's command as a user would type it: the installed ``skill-eval`` (by the path that
    finds it from the checkout when it is not on PATH), the arguments quoted for a shell."""
    installed = Path(sys.executable).parent / "skill-eval"
    on_path = shutil.which("skill-eval")
    if on_path and Path(on_path).resolve() == installed.resolve():
        program = "skill-eval"
    elif installed.is_relative_to(ROOT):
        program = str(installed.relative_to(ROOT))
    else:
        program = str(installed)
    return shlex.join([program, *args])


def main(argv: list[str] | None = None) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    targets, models, scenario = demo_plan(extra)
    with tempfile.TemporaryDirectory(prefix="skill-eval-demo-") as tmp, OfflineModelServer(scenario) as server:
        repo = git_copy(Path(tmp) / "demo-repo")
        print(f"offline model server (SCRIPTED demo model, not an LLM): {server.base_url}", flush=True)
        threshold = [] if "--fail-under" in extra else ["--fail-under", DEMO_THRESHOLD]
        out = (
            []
            if any(a == "--out" or a.startswith("--out=") for a in extra)
            else ["--out", str(ROOT / "zuvo" / "reports")]
        )
        if threshold:
            print(
                f"the scripted model fails some assertions on purpose: the demo passes --fail-under {DEMO_THRESHOLD}"
                " (a run's default threshold is 1.0: every assertion must pass)",
                flush=True,
            )
        cmd = [
            sys.executable,
            "-P",
            "-m",
            "producer.commands.cli",
            "run",
            *targets,
            "--force",
            "--repo",
            str(repo),
            *models,
            "--judge",
            JUDGE,
            "--api-base",
            server.base_url,
            *out,
            *threshold,
            *extra,
        ]
        print("$ " + copyable(cmd[4:]), flush=True)
        return subprocess.call(cmd, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
