"""A plugin case's ``scaffold_script`` is repo content: it runs inside the sandbox before the agent,
never on the host, with no network; what it creates is the case's setup, not the agent's work; a
script that fails blocks the case by name."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from engine.snapshot import snapshot_repo
from engine.store import LocalStore
from producer.corpus.repo import Repo
from schemas.errors import BadFixture
from schemas.trajectory import ToolResultEvent
from testkit.offline_server import OfflineModelServer
from tests.executor_support import open_test_sandbox
from tests.model_support import server_fixtures
from worker.executor.agent import run_agent
from worker.executor.prompt import ExecutorInputs
from worker.grading.deterministic import check_assertion
from worker.models.client import GatedModelClient
from worker.sandbox import SandboxLimits
from worker.workspace import materialize_workspace

pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly:UserWarning")

FIXTURE = Path(__file__).parents[1] / "fixtures" / "plugin-weather"
SUITE = "evals/*/ [plugin suite: forecast]"
server, scripted, client = server_fixtures()


def plugin_with_scaffold(tmp_path: Path, script: str) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    case = repo / "evals" / "oslo-rain"
    (case / "case.yaml").write_text((case / "case.yaml").read_text() + "context:\n  scaffold_script: scaffold.sh\n")
    (case / "scaffold.sh").write_text(script)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True)
    return repo


def run_oslo(client: GatedModelClient, repo: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    bundle = Repo(repo).load(SUITE)
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(repo, store)
    case = bundle.corpus.case(1)
    with materialize_workspace(
        store,
        key,
        skill="forecast",
        case=case,
        parent=tmp_path / "ws",
        cache_dir=tmp_path / "cache",
        graded_paths=bundle.graded_paths,
    ) as ws:
        sandbox = open_test_sandbox(ws.path, SandboxLimits(timeout_s=30))
        trajectory = run_agent(
            client, "openai/scripted-exec", ExecutorInputs("forecast", None, {}, case), sandbox=sandbox
        )
        return case, trajectory


def test_a_scaffold_runs_in_the_sandbox_without_network_or_host_and_its_files_are_not_the_agents(
    client: GatedModelClient, scripted: OfflineModelServer, tmp_path: Path
) -> None:
    marker = tmp_path / "host-was-reached"
    script = (
        "set -u\necho seeded > seed.txt\nmkdir -p reports/old && echo x > reports/old/seed.md\n"
        f"touch {marker} 2>/dev/null && echo HOST >> seed.txt\n"
        "python3 -c \"import urllib.request; urllib.request.urlopen('http://example.com', timeout=5)\" 2>/dev/null"
        " && echo NET >> seed.txt || echo NONET >> seed.txt\n"
    )
    repo = plugin_with_scaffold(tmp_path, script)
    scripted.set_scenario(
        {
            "rules": [
                {
                    "name": "executor",
                    "model": "scripted-exec",
                    "tools": True,
                    "replies": [
                        {"tool_calls": [{"name": "shell", "arguments": {"command": "cat seed.txt; ls evals"}}]},
                        {"text": "No rain in Oslo."},
                    ],
                }
            ]
        }
    )
    case, trajectory = run_oslo(client, repo, tmp_path)

    [result] = [e for e in trajectory.events if isinstance(e, ToolResultEvent)]
    assert result.output.startswith("seeded\nNONET\n"), result.output  # ran, no network, never the host
    assert "scaffold.sh" not in result.output  # the case folder (and its script) is not in the workspace
    assert not marker.exists()
    # The scaffold's files are the case's setup: not among the files the run changed.
    assert "seed.txt" not in trajectory.final_files and "reports/old/seed.md" not in trajectory.final_files
    no_reports = case.assertions[2]
    assert check_assertion(no_reports, trajectory).passed  # type: ignore[arg-type]


def test_a_failing_scaffold_blocks_the_case_by_name(
    client: GatedModelClient, scripted: OfflineModelServer, tmp_path: Path
) -> None:
    repo = plugin_with_scaffold(tmp_path, "echo preparing\nexit 3\n")
    scripted.set_scenario(
        {"rules": [{"name": "executor", "model": "scripted-exec", "tools": True, "replies": [{"text": "never asked"}]}]}
    )
    with pytest.raises(BadFixture, match=r"case 1: scaffold_script exited 3 .*preparing"):
        run_oslo(client, repo, tmp_path)
    assert scripted.requests() == []  # the agent never started
