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
``--executor opencode`` the real OpenCode binary the same way, over chat completions
(``testkit/scenarios/demo-opencode.json``); ``--executor gemini-cli`` the real Gemini CLI over
the Gemini API (``testkit/scenarios/demo-gemini-cli.json``); ``--executor qwen-code`` the real Qwen
Code over chat completions (``testkit/scenarios/demo-qwen-code.json``); ``--executor copilot-cli``
the real GitHub Copilot CLI over chat completions (``testkit/scenarios/demo-copilot-cli.json``).
"""

from __future__ import annotations

import json
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


CLAUDE_CODE_MODEL = "anthropic/claude-sonnet-4-5"
HARNESS_DEMOS = {
    "claude-code": CLAUDE_CODE_MODEL,
    "opencode": "openai/gpt-5",
    "gemini-cli": "gemini/gemini-2.5-pro",
    "qwen-code": "openai/gpt-5",
    "copilot-cli": "openai/gpt-5",
}
"""The real harnesses the demo runs, each with the model its scripted scenario speaks."""

DEMO_THRESHOLD = "0.6"
"""The demo's ``--fail-under``: its scripted model fails some assertions on purpose (to show what a
failure looks like) and passes about two thirds of each corpus, so the demo sets a threshold it
meets instead of the strict default 1.0, and says so."""


def demo_scenario(name: str = "demo") -> dict[str, Any]:
    """A bundled demo scenario plus the rules that let its scripted judge pass calibration honestly."""
    scenario: dict[str, Any] = json.loads((SCENARIO_DIR / f"{name}.json").read_text(encoding="utf-8"))
    # Calibration's rules first: its assertions are worded like the demo corpus's, and one rule must judge both.
    calibration = judge_rules()
    if name != "demo":  # a harness's shell tool is Bash, bash or run_shell_command: the same rules judge it too
        calibration = [
            {
                **r,
                "transcript_regex": r["transcript_regex"].replace(
                    "shell\\(", "(?:shell|Bash|bash|run_shell_command)\\("
                ),
            }
            for r in calibration
        ]
    scenario["judge"] = [*calibration, *scenario.get("judge", [])]
    return scenario


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
    harness = next((h for h in HARNESS_DEMOS if h in extra and "--executor" in extra), None)
    targets, executor = (["commit-message"], HARNESS_DEMOS[harness]) if harness else (["--all-evals"], EXECUTOR)
    scenario = demo_scenario(f"demo-{harness}" if harness else "demo")
    with tempfile.TemporaryDirectory(prefix="skill-eval-demo-") as tmp, OfflineModelServer(scenario) as server:
        repo = git_copy(Path(tmp) / "demo-repo")
        print(f"offline model server (SCRIPTED demo model, not an LLM): {server.base_url}", flush=True)
        threshold = [] if "--fail-under" in extra else ["--fail-under", DEMO_THRESHOLD]
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
            "--model",
            executor,
            "--judge",
            JUDGE,
            "--api-base",
            server.base_url,
            "--out",
            str(ROOT / "zuvo" / "reports"),
            *threshold,
            *extra,
        ]
        print("$ " + copyable(cmd[4:]), flush=True)
        return subprocess.call(cmd, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
