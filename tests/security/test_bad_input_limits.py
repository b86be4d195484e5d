"""Attack 12: bad input that crashed instead of being named, and resources without a limit.

* a deeply nested or oversized corpus is ``BLOCKED_BAD_CORPUS`` (was a RecursionError crash);
* a fixture path longer than the filesystem allows is ``BLOCKED_BAD_FIXTURE`` (was executor-failed);
* an agent filling the workspace ends its shard as behaviour at the workspace quota;
* cleanup removes a workspace with read-only folders holding links, mode-000 folders, a tree
  deeper than PATH_MAX and a process still writing, never touching a link's target.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
import redis

from engine.snapshot import snapshot_repo
from engine.store import LocalStore
from producer.corpus.repo import Repo
from producer.corpus.rules import MAX_CORPUS_BYTES, MAX_CORPUS_DEPTH
from schemas.corpus import EvalCase, Fixture
from schemas.errors import BadCorpus, BadFixture
from schemas.model_config import parse_model_config
from schemas.status import SandboxMode
from testkit.offline_server import OfflineModelServer
from tests.security.harness import case, make_repo, shell_agent
from worker.executor.agent import run_agent
from worker.executor.prompt import ExecutorInputs
from worker.models.client import GatedModelClient
from worker.sandbox import SandboxLimits, open_sandbox
from worker.workspace import materialize_workspace, remove_tree

SKILL = "limits"


def _corpus_repo(tmp_path: Path, corpus_text: str) -> Path:
    repo = make_repo(tmp_path / "repo", SKILL, [case(1, "p", ["runs git status first"])], commit=False)
    (repo / "evals" / f"{SKILL}.evals.json").write_text(corpus_text)
    return repo


@pytest.mark.parametrize("depth", [MAX_CORPUS_DEPTH + 1, 200_000])
def test_a_deeply_nested_corpus_is_bad_corpus_not_a_crash(tmp_path: Path, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    text = json.dumps({"skill_name": SKILL, "evals": "PLACEHOLDER"}).replace('"PLACEHOLDER"', nested)
    with pytest.raises(BadCorpus, match=r"BLOCKED_BAD_CORPUS: evals/limits.evals.json: \$.*(nested|deep)"):
        Repo(_corpus_repo(tmp_path, text)).load(f"evals/{SKILL}.evals.json")


def test_an_oversized_corpus_is_bad_corpus(tmp_path: Path) -> None:
    text = json.dumps({"skill_name": SKILL, "evals": [], "pad": "x" * MAX_CORPUS_BYTES})
    with pytest.raises(BadCorpus, match="larger than"):
        Repo(_corpus_repo(tmp_path, text)).load(f"evals/{SKILL}.evals.json")


@pytest.mark.parametrize("path", ["a" * 300 + ".txt", "d/" * 600 + "f.txt"], ids=["long-name", "long-path"])
def test_a_fixture_path_longer_than_the_filesystem_allows_is_bad_fixture(tmp_path: Path, path: str) -> None:
    repo = make_repo(tmp_path / "repo", SKILL, [case(1, "p", ["runs git status first"])])
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(repo, store)
    bad = EvalCase(
        id=1,
        prompt="p",
        expected_output="e",
        files=(),
        assertions=("a" * 20,),
        fixtures=(Fixture(path=path, content="x"),),
    )
    with (
        pytest.raises(BadFixture, match="BLOCKED_BAD_FIXTURE: case 1"),
        materialize_workspace(store, key, skill=SKILL, case=bad, parent=tmp_path / "ws", cache_dir=tmp_path / "cache"),
    ):
        pytest.fail("the case must never run")
    assert list((tmp_path / "ws").iterdir()) == []


@pytest.mark.slow
def test_an_agent_filling_the_workspace_ends_its_shard_as_behaviour(
    tmp_path: Path, server: OfflineModelServer, redis_client: redis.Redis
) -> None:
    cases = [
        case(1, "CASE-ONE fill", ["never writes junk files to the disk"]),
        case(2, "two", ["never writes junk to the disk"]),
    ]
    repo = make_repo(tmp_path / "repo", SKILL, cases)
    fill = "for i in $(seq 1 40); do head -c 1000000 /dev/urandom > junk$i; done"
    server.set_scenario({"rules": [shell_agent("CASE-ONE", [fill, "echo still-running"])]})
    bundle = Repo(repo).load(f"evals/{SKILL}.evals.json")
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(repo, store)
    config = parse_model_config({"retry": {"max_attempts": 1}}, api_base_override=server.base_url)
    client = GatedModelClient(config, redis_client)
    limits = SandboxLimits(workspace_mb=20)
    with materialize_workspace(
        store, key, skill=SKILL, case=bundle.corpus.case(1), parent=tmp_path / "ws", cache_dir=tmp_path / "cache"
    ) as ws:
        trajectory = run_agent(
            client,
            "openai/exec-a",
            ExecutorInputs(SKILL, "", {}, bundle.corpus.case(1)),
            sandbox=open_sandbox(ws.path, SandboxMode.BWRAP, limits),
        )
    assert trajectory.end_reason.value == "workspace-quota"
    assert "still-running" not in trajectory.model_dump_json()
    assert "over its 20 MB quota" in trajectory.model_dump_json()
    assert list((tmp_path / "ws").iterdir()) == []


def test_cleanup_cannot_fail_on_odd_permissions_links_depth_or_a_live_writer(tmp_path: Path) -> None:
    host = tmp_path / "host-file"
    host.write_text("host")
    host.chmod(0o400)
    ws = tmp_path / "ws"
    (ws / "ro").mkdir(parents=True)
    (ws / "ro" / "link").symlink_to(host)
    (ws / "ro" / "dirlink").symlink_to(tmp_path)
    (ws / "ro").chmod(0o500)
    (ws / "locked" / "inner").mkdir(parents=True)
    (ws / "locked" / "inner" / "f").write_text("x")
    (ws / "locked" / "inner").chmod(0)
    (ws / "locked").chmod(0)
    subprocess.run(
        ["sh", "-c", "d=deep; for i in $(seq 1 1200); do mkdir $d 2>/dev/null; cd $d; done"], cwd=ws, check=False
    )
    writer = subprocess.Popen(["sh", "-c", "while :; do touch w$$-$(date +%N) 2>/dev/null || exit 0; done"], cwd=ws)
    try:
        assert remove_tree(ws) is True
    finally:
        writer.kill()
        writer.wait()
    assert not os.path.lexists(ws)
    assert host.read_text() == "host" and stat.S_IMODE(host.stat().st_mode) == 0o400
    assert tmp_path.is_dir()
