"""One real run for every viewer test: the embedded cluster, bwrap and the offline model server.

The run holds what a viewer must show and must not let run: a passing and a failing case, a
``<script>`` in a tool result and in an assertion. Made once per session (a cluster start
costs seconds); tests that write labels use their own copy of its store.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, case, checked_env, git_init, new_repo, ran, scenario, shell_rule, write_skill

SCRIPT_RESULT = "<script>window.pwnedResult=1</script>"
SCRIPT_ASSERTION = "<script>window.pwnedAssertion=1</script>"
SCRIPT_MODEL = "openai/exec-<script>window.pwnedModel=1</script>"
MODELS = ("openai/exec-a", SCRIPT_MODEL)
CASES = [
    case(
        1,
        "Viewer one: greet and print markup.",
        [
            "The agent runs echo viewer-one-a in the shell",
            f"The agent runs echo viewer-one-b {SCRIPT_ASSERTION} in the shell",
        ],
    ),
    case(
        2,
        "Viewer two: say two of three things.",
        [
            "The agent runs echo viewer-two-a in the shell",
            "The agent runs echo viewer-two-b in the shell",
            "The agent runs echo viewer-two-c in the shell",
        ],
    ),
]
RULES = [
    shell_rule("Viewer one:", ["echo viewer-one-a", f"printf '%s\\n' '{SCRIPT_RESULT}'"]),
    shell_rule("Viewer two:", ["echo viewer-two-a", "echo viewer-two-b"]),
]
JUDGE = [ran(m) for m in ("viewer-one-a", "viewer-one-b", "viewer-two-a", "viewer-two-b", "viewer-two-c")]


@dataclass(frozen=True)
class ViewedRun:
    env: Env
    run_id: str
    repo: Path

    def store_copy(self, dest: Path) -> Path:
        """A private copy of the run's store, for a test that writes to it."""
        shutil.copytree(self.env.store, dest)
        return dest


@pytest.fixture(scope="session")
def model_server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer({"rules": []}) as s:
        yield s


@pytest.fixture(scope="session")
def viewed_run(tmp_path_factory: pytest.TempPathFactory, model_server: OfflineModelServer) -> Iterator[ViewedRun]:
    base = tmp_path_factory.mktemp("viewer")
    with checked_env(base / "e2e", model_server.base_url) as env:
        repo = new_repo(base / "repo")
        write_skill(repo, "hostile", CASES)
        git_init(repo)
        model_server.set_scenario(scenario(RULES, JUDGE))
        res = env.run(repo, "hostile", "--fail-under", "0.8", models=MODELS)
        assert res.code == 1, res.stdout + res.stderr  # 3/5 is under 0.8: FAIL
        yield ViewedRun(env, res.run_id, repo)
