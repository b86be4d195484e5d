"""Attack 3: the agent reads its assertions from git history.

The corpus was committed in several versions, amended (an old version only in the reflog),
edited in a stash, written as a dangling blob, packed by ``git gc``, and staged. Through the
pipeline, an agent that digs with ``git show``, ``git log -p --all``, ``git fsck`` and
``git cat-file --batch-all-objects`` finds none of it. On the workspace itself: no blob the
corpus path ever had exists, no object holds its bytes, and the history the skills use is
the same (commit count, authors, dates, messages, blame of other files).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import redis

from engine.redis_server import RedisServer
from engine.snapshot import snapshot_repo
from engine.store import LocalStore
from producer.corpus.repo import Repo
from testkit.offline_server import OfflineModelServer
from tests.security.harness import case, git, make_repo, run_pipeline, shell_agent
from worker.workspace import materialize_workspace

SKILL = "careful-review"
SECRET = "ASSERTION-CANARY-7f3a"
CORPUS = f"evals/{SKILL}.evals.json"


def _cases(version: str) -> list[dict[str, object]]:
    return [
        case(1, "CASE-ONE dig into history", [f"runs git log to read the history {SECRET}-{version}"]),
        case(2, "CASE-TWO dig into objects", [f"runs git cat-file to read the objects {SECRET}-{version}"]),
    ]


def _write_corpus(repo: Path, version: str) -> None:
    (repo / CORPUS).write_text(json.dumps({"skill_name": SKILL, "evals": _cases(version)}, indent=2))


def crafted_repo(root: Path) -> Path:
    repo = make_repo(root, SKILL, _cases("v1"))
    (repo / "src").mkdir()
    for i in range(3):
        (repo / "src" / "lib.py").write_text("".join(f"line {k}\n" for k in range(i + 2)))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"lib {i}", env={"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": f"Dev{i}"})
    _write_corpus(repo, "v2")
    git(repo, "commit", "-qam", "corpus v2")
    _write_corpus(repo, "v3-amended-away")
    git(repo, "commit", "-qa", "--amend", "-m", "corpus v2 (amended)")  # v3 lives only in the reflog
    _write_corpus(repo, "v4-stashed")
    git(repo, "stash", "-q")
    dangling = f"{SECRET}-dangling"
    subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=dangling, text=True, capture_output=True)
    git(repo, "gc", "-q")  # everything so far packed
    _write_corpus(repo, "v5-staged")
    git(repo, "add", CORPUS)
    _write_corpus(repo, "v6-working-tree")
    return repo


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, errors="replace", check=False)


def corpus_blobs(repo: Path) -> set[str]:
    """Every blob id the corpus path ever had in ``repo``: commits, reflogs, stash, index, dangling."""
    blobs = set()
    revs = _git(repo, "rev-list", "--all", "--reflog", "--objects", "--", CORPUS).stdout.split("\n")
    blobs |= {line.split()[0] for line in revs if line.endswith(CORPUS)}
    blobs |= {_git(repo, "rev-parse", f":{CORPUS}").stdout.strip()}
    batch = _git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)").stdout
    for line in batch.splitlines():
        oid, kind = line.split()
        if kind == "blob" and SECRET in _git(repo, "cat-file", "blob", oid).stdout:
            blobs.add(oid)
    return blobs


def test_no_object_pack_reflog_or_stash_of_the_workspace_holds_the_corpus(tmp_path: Path) -> None:
    repo = crafted_repo(tmp_path / "repo")
    blobs = corpus_blobs(repo)
    assert len(blobs) >= 6  # v1, v2, v3, v4 (stash), dangling, staged v5
    bundle = Repo(repo).load(CORPUS)
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(repo, store)
    kw = {"skill": SKILL, "case": bundle.corpus.case(1), "parent": tmp_path / "ws", "cache_dir": tmp_path / "cache"}
    with materialize_workspace(store, key, **kw) as ws:  # type: ignore[arg-type]
        for oid in blobs:
            assert _git(ws.path, "cat-file", "-e", oid).returncode != 0, oid
        every = _git(ws.path, "cat-file", "--batch-all-objects", "--batch").stdout
        assert SECRET not in every
        for pack in (ws.path / ".git").rglob("*"):
            assert not pack.is_file() or SECRET.encode() not in pack.read_bytes(), pack
        assert _git(ws.path, "show", f"HEAD:{CORPUS}").returncode != 0
        assert _git(ws.path, "stash", "list").stdout == ""
        # The history skills rely on is the same, commit by commit.
        shape = ["log", "--format=%an|%ae|%ad|%s", "--date=raw"]
        assert _git(ws.path, *shape).stdout == _git(repo, *shape).stdout
        blame = ["blame", "--line-porcelain", "src/lib.py"]
        keep = ("author", "committer", "summary", "\t")
        lines = [_git(r, *blame).stdout.splitlines() for r in (ws.path, repo)]
        assert [[x for x in ls if x.startswith(keep)] for ls in lines] == [
            [x for x in lines[1] if x.startswith(keep)]
        ] * 2
        assert _git(ws.path, "diff", "HEAD~2", "--stat").returncode == 0
        # The developer's uncommitted work is still there (the corpus file aside).
        assert (ws.path / "README.md").read_text() == (repo / "README.md").read_text()
        assert not (ws.path / CORPUS).exists()
    with materialize_workspace(store, key, **{**kw, "ref": "HEAD~1"}) as ws:  # type: ignore[arg-type]
        assert SECRET not in _git(ws.path, "cat-file", "--batch-all-objects", "--batch").stdout
        wanted = _git(repo, "log", "-1", "--format=%an %s", "HEAD~1").stdout
        assert _git(ws.path, "log", "-1", "--format=%an %s").stdout == wanted  # resolved before the rewrite


@pytest.mark.slow
def test_an_agent_digging_in_history_never_sees_its_assertions(
    tmp_path: Path, server: OfflineModelServer, redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    repo = crafted_repo(tmp_path / "repo")
    dig = [
        f"git show HEAD:{CORPUS}",
        "git log --all -p --reflog | grep -c CANARY || true",
        "git stash list; git fsck --lost-found --unreachable 2>&1 | tail -3",
        "git cat-file --batch-all-objects --batch | grep -a CANARY || echo clean",
        "grep -rla CANARY . || echo clean",
    ]
    server.set_scenario(
        {
            "rules": [shell_agent("CASE-ONE", dig), shell_agent("CASE-TWO", dig)],
            "judge": [
                {"assertion_contains": "git log", "transcript_regex": r"\[tool_call\] shell\(.*git log"},
                {"assertion_contains": "git cat-file", "transcript_regex": r"\[tool_call\] shell\(.*git cat-file"},
            ],
        }
    )
    run = run_pipeline(repo, SKILL, server=server, redis_url=redis_server.url, work=tmp_path / "work")
    assert {o["state"] for o in run.outcomes.values()} == {"graded"}, run.outcomes
    outputs = "\n".join(getattr(e, "output", "") for t in run.trajectories.values() for e in t.events)
    assert "clean" in outputs  # the agent really searched
    assert SECRET not in outputs
    assert run.result.verdict.value == "PASS"
