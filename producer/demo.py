"""The README's main job: a complete offline evaluation of the bundled example repo.

Starts the offline model server with the bundled *scripted* demo scenario (plainly not an
LLM: it replays tool-call scripts and judges by rules), copies examples/demo-repo into a
fresh git checkout, and runs ``skill-eval run --all-evals`` against it through the embedded
one-host cluster (private Redis + Celery workers + bubblewrap sandbox). Extra arguments are
passed to ``skill-eval run``. Exit code: the run's verdict.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from testkit.judge import calibration_judge_rules as judge_rules
from testkit.offline_server import SCENARIO_DIR, OfflineModelServer

ROOT = Path(__file__).resolve().parent.parent
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


def demo_scenario() -> dict[str, Any]:
    """The bundled demo scenario plus the rules that let its scripted judge pass calibration honestly."""
    scenario: dict[str, Any] = json.loads((SCENARIO_DIR / "demo.json").read_text(encoding="utf-8"))
    # Calibration's rules first: its assertions are worded like the demo corpus's, and one rule must judge both.
    scenario["judge"] = [*judge_rules(), *scenario.get("judge", [])]
    return scenario


def main(argv: list[str] | None = None) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="skill-eval-demo-") as tmp, OfflineModelServer(demo_scenario()) as server:
        repo = git_copy(Path(tmp) / "demo-repo")
        print(f"offline model server (SCRIPTED demo model, not an LLM): {server.base_url}", flush=True)
        cmd = [
            sys.executable,
            "-m",
            "producer.cli",
            "run",
            "--all-evals",
            "--force",
            "--repo",
            str(repo),
            "--model",
            EXECUTOR,
            "--judge",
            JUDGE,
            "--api-base",
            server.base_url,
            "--out",
            str(ROOT / "zuvo" / "reports"),
            *extra,
        ]
        print("$ skill-eval " + " ".join(cmd[3:]), flush=True)
        return subprocess.call(cmd, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
