"""Each case gets its own hardened copy of the repo, with fixtures staged as the contract says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.settings import default_work_root
from engine.snapshot import snapshot_repo
from engine.store import LocalStore
from schemas.corpus import EvalCase, Fixture
from schemas.errors import BadFixture, BadSkillName, FixtureNeedsGit, NoIsolation
from schemas.status import FixtureStage
from tests.conftest import git
from worker.fixtures import resolve_fixture_path
from worker.workspace import Workspace, materialize_workspace, reclaim_leftovers

SKILL = "commit-message"


def _case(*fixtures: Fixture, files: tuple[str, ...] = ("README.md",)) -> EvalCase:
    return EvalCase(id=7, prompt="p", expected_output="e", files=files, assertions=("a" * 20,), fixtures=fixtures)


def _git_out(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def env(tmp_path: Path, example_repo: Path) -> dict[str, object]:
    """The example repo with developer WIP, snapshotted into a local store."""
    (example_repo / "README.md").write_text("uncommitted edit\n")
    (example_repo / "untracked.txt").write_text("untracked\n")
    (example_repo / "node_modules" / "pkg").mkdir(parents=True)
    (example_repo / "node_modules" / "pkg" / "index.js").write_text("heavy")
    (example_repo / "src" / "build").mkdir(parents=True)
    (example_repo / "src" / "build" / "out.o").write_text("heavy")
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(example_repo, store)
    return {"store": store, "key": key, "parent": tmp_path / "ws", "cache": tmp_path / "cache"}


def _open(env: dict[str, object], case: EvalCase, **kw: object):  # type: ignore[no-untyped-def]
    return materialize_workspace(
        env["store"],  # type: ignore[arg-type]
        env["key"],  # type: ignore[arg-type]
        skill=kw.pop("skill", SKILL),  # type: ignore[arg-type]
        case=case,
        parent=env["parent"],  # type: ignore[arg-type]
        cache_dir=env["cache"],  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


# --- current version ----------------------------------------------------------------------


def test_the_current_version_is_the_tree_on_disk_without_heavy_folders(env: dict[str, object]) -> None:
    with _open(env, _case()) as ws:
        assert isinstance(ws, Workspace) and ws.is_git and ws.ref is None
        assert (ws.path / "README.md").read_text() == "uncommitted edit\n"
        assert (ws.path / "untracked.txt").read_text() == "untracked\n"
        assert not (ws.path / "node_modules").exists()
        assert not (ws.path / "src" / "build").exists()
        assert (ws.path / "src").is_dir()


def test_only_the_graded_corpus_is_removed_and_siblings_stay(env: dict[str, object]) -> None:
    with _open(env, _case()) as ws:
        assert sorted(p.name for p in (ws.path / "evals").iterdir()) == ["changelog-entry.evals.json"]


def test_every_remote_is_removed(env: dict[str, object]) -> None:
    with _open(env, _case()) as ws:
        assert _git_out(ws.path, "remote") == ""


def test_edits_in_one_workspace_never_reach_the_cache_or_the_next_workspace(env: dict[str, object]) -> None:
    with _open(env, _case()) as ws:
        (ws.path / "README.md").write_text("changed by the agent\n")
        git(ws.path, "commit", "-qam", "agent commit")
    with _open(env, _case()) as ws:
        assert (ws.path / "README.md").read_text() == "uncommitted edit\n"
        assert "agent commit" not in _git_out(ws.path, "log", "--oneline")


def test_the_workspace_is_removed_on_exit_and_on_exceptions(env: dict[str, object]) -> None:
    with _open(env, _case()) as ws:
        container = ws.path.parent
    assert not container.exists()
    with pytest.raises(RuntimeError, match="boom"), _open(env, _case()) as ws:
        container = ws.path.parent
        (ws.path / "locked").mkdir()
        (ws.path / "locked" / "f").write_text("x")
        (ws.path / "locked").chmod(0)  # an agent may leave folders it cannot even list
        raise RuntimeError("boom")
    assert not container.exists()
    assert list(Path(env["parent"]).iterdir()) == []  # type: ignore[arg-type]


def test_a_workspace_that_cannot_be_created_is_no_isolation(env: dict[str, object], tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    env = {**env, "parent": blocker}
    with pytest.raises(NoIsolation, match="case 7"), _open(env, _case()):
        pytest.fail("the case must never run")


def test_a_missing_snapshot_is_no_isolation(env: dict[str, object]) -> None:
    env = {**env, "key": "snapshots/" + "0" * 64 + ".tar"}
    with pytest.raises(NoIsolation, match="no artifact"), _open(env, _case()):
        pytest.fail("the case must never run")


def test_a_malformed_skill_name_is_refused(env: dict[str, object]) -> None:
    with pytest.raises(BadSkillName), _open(env, _case(), skill="../evals"):
        pytest.fail("the case must never run")


def test_a_git_file_pointing_outside_is_dropped_and_the_copy_is_not_git(tmp_path: Path) -> None:
    repo = tmp_path / "worktree"
    repo.mkdir()
    (repo / ".git").write_text(f"gitdir: {tmp_path}/real/.git/worktrees/x\n")
    (repo / "a.txt").write_text("a")
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(repo, store)
    with materialize_workspace(
        store, key, skill="s", case=_case(), parent=tmp_path / "ws", cache_dir=tmp_path / "c"
    ) as ws:
        assert not ws.is_git and not (ws.path / ".git").exists()


# --- baseline at a ref ---------------------------------------------------------------------


def test_a_baseline_is_a_detached_clone_at_the_ref_without_wip(env: dict[str, object], example_repo: Path) -> None:
    first = _git_out(example_repo, "rev-parse", "HEAD").strip()
    with _open(env, _case(), ref=first) as ws:
        assert ws.is_git and ws.ref == first
        # The history was rewritten without the corpus: another id, the same commit otherwise.
        shown = ["log", "-1", "--format=%an %ae %ad %s"]
        assert _git_out(ws.path, *shown, "HEAD") == _git_out(example_repo, *shown, first)
        assert _git_out(ws.path, "rev-list", "--count", "HEAD") == _git_out(example_repo, "rev-list", "--count", first)
        on_branch = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=ws.path, capture_output=True)
        assert on_branch.returncode != 0  # detached
        assert (ws.path / "README.md").read_text() != "uncommitted edit\n"
        assert not (ws.path / "untracked.txt").exists()
        assert not (ws.path / "evals" / f"{SKILL}.evals.json").exists()
        assert _git_out(ws.path, "remote") == ""
        # Its own object store: no alternates, no object file shared with the cache.
        assert not (ws.path / ".git" / "objects" / "info" / "alternates").exists()
        objects = "objects/*/*"
        cache_inodes = {p.stat().st_ino for p in Path(env["cache"]).rglob(objects)}  # type: ignore[arg-type]
        ws_inodes = {p.stat().st_ino for p in (ws.path / ".git").glob(objects)}
        assert ws_inodes and not (ws_inodes & cache_inodes)
    detached = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=example_repo, capture_output=True)
    assert detached.returncode == 0  # the live repo is untouched (still on its branch)


def test_a_baseline_at_a_bad_ref_is_no_isolation(env: dict[str, object]) -> None:
    for ref in ("no-such-branch", "--upload-pack=touch /tmp/x"):
        with pytest.raises(NoIsolation, match="ref"), _open(env, _case(), ref=ref):
            pytest.fail("the case must never run")
    assert list(Path(env["parent"]).iterdir()) == []  # type: ignore[arg-type]


# --- fixtures ------------------------------------------------------------------------------


def test_base_and_head_of_one_path_make_git_diff_show_exactly_the_change(env: dict[str, object]) -> None:
    case = _case(
        Fixture(path="src/order.ts", content="let total = 1;\n", stage=FixtureStage.BASE),
        Fixture(path="src/order.ts", content="let total = 2;\n"),
    )
    with _open(env, case) as ws:
        assert _git_out(ws.path, "status", "--porcelain") == " M src/order.ts\n"
        diff = _git_out(ws.path, "diff")
        assert "-let total = 1;\n+let total = 2;\n" in diff
        log = _git_out(ws.path, "log", "--format=%s|%an|%ae", "-2").splitlines()
        assert log == [
            "eval-fixture: base state|skill-eval|skill-eval@localhost",
            "eval-fixture: sandbox snapshot (pre-existing WIP)|skill-eval|skill-eval@localhost",
        ]
        # The developer's WIP went into the snapshot commit, not into the eval's diff.
        assert "README.md" not in diff and "untracked.txt" not in diff


def test_a_files_entry_only_a_fixture_provides_exists_for_the_executor(env: dict[str, object]) -> None:
    case = _case(Fixture(path="src/services/new.service.ts", content="x"), files=("src/services/new.service.ts",))
    with _open(env, case) as ws:
        assert (ws.path / "src" / "services" / "new.service.ts").read_text() == "x"
        assert "?? src/services/" in _git_out(ws.path, "status", "--porcelain")  # head: uncommitted


def test_fixture_content_is_written_verbatim(env: dict[str, object]) -> None:
    content = "line\r\nno final newline \u00e9"
    with _open(env, _case(Fixture(path="f.txt", content=content))) as ws:
        assert (ws.path / "f.txt").read_bytes() == content.encode()


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "../outside.txt",
        "src/../../outside.txt",
        "src/*.ts",
        "a?b",
        "[ab]",
        "~/x",
        ".git/config",
        ".",
        "",
    ],
)
def test_an_unsafe_fixture_path_blocks_the_case_naming_case_and_path(env: dict[str, object], path: str) -> None:
    case = _case(Fixture(path="ok.txt", content="x"), Fixture(path=path, content="x"))
    with pytest.raises(BadFixture) as info, _open(env, case):
        pytest.fail("the case must never run")
    assert "case 7" in str(info.value) and repr(path) in str(info.value)
    assert str(info.value).startswith("BLOCKED_BAD_FIXTURE: ")
    assert list(Path(env["parent"]).iterdir()) == []  # type: ignore[arg-type]


def test_a_fixture_escaping_through_a_symlink_in_the_repo_blocks_the_case(tmp_path: Path, example_repo: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (example_repo / "link").symlink_to(outside)
    (example_repo / "src" / "up").symlink_to("../..")
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(example_repo, store)
    for bad in ("link/pwned.txt", "src/up/pwned.txt"):
        with (
            pytest.raises(BadFixture, match="escapes the workspace"),
            materialize_workspace(
                store,
                key,
                skill=SKILL,
                case=_case(Fixture(path=bad, content="x")),
                parent=tmp_path / "ws",
                cache_dir=tmp_path / "cache",
            ),
        ):
            pytest.fail("the case must never run")
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "pwned.txt").exists()


def test_base_fixtures_without_git_block_the_case(tmp_path: Path) -> None:
    repo = tmp_path / "plain"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.txt").write_text("a")
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(repo, store)
    case = _case(Fixture(path="src/a.txt", content="b", stage=FixtureStage.BASE))
    with (
        pytest.raises(FixtureNeedsGit, match=r"case 7: base-stage fixtures 'src/a.txt'"),
        materialize_workspace(store, key, skill="s", case=case, parent=tmp_path / "ws", cache_dir=tmp_path / "c"),
    ):
        pytest.fail("the case must never run")
    # Head fixtures alone are fine without git.
    head_only = _case(Fixture(path="src/a.txt", content="b"))
    with materialize_workspace(
        store, key, skill="s", case=head_only, parent=tmp_path / "ws", cache_dir=tmp_path / "c"
    ) as ws:
        assert not ws.is_git and (ws.path / "src" / "a.txt").read_text() == "b"


def test_fixture_commits_ignore_the_repos_hooks_and_the_hosts_git_config(
    tmp_path: Path, example_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = example_repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {tmp_path}/hook-ran\nexit 1\n")
    hook.chmod(0o755)
    fake_home = tmp_path / "home"
    fake_home.mkdir()
    (fake_home / ".gitconfig").write_text("[user]\n\tname = Host User\n[commit]\n\tgpgsign = true\n")
    monkeypatch.setenv("HOME", str(fake_home))
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(example_repo, store)
    case = _case(Fixture(path="b.txt", content="base", stage=FixtureStage.BASE))
    with materialize_workspace(
        store, key, skill=SKILL, case=case, parent=tmp_path / "ws", cache_dir=tmp_path / "c"
    ) as ws:
        assert _git_out(ws.path, "log", "-1", "--format=%an").strip() == "skill-eval"
    assert not (tmp_path / "hook-ran").exists()


# --- leftovers ------------------------------------------------------------------------------


def test_reclaim_removes_leftovers_of_dead_processes_only(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    parent = tmp_path / "ws"
    for name in (f"{dead.pid}-0123abcd", f"{os.getpid()}-89abcdef", f"{os.getppid()}-00000000", "unrelated"):
        (parent / name / "repo").mkdir(parents=True)
    assert reclaim_leftovers(parent) == 2
    assert sorted(p.name for p in parent.iterdir()) == sorted([f"{os.getppid()}-00000000", "unrelated"])
    assert reclaim_leftovers(tmp_path / "missing") == 0


def test_a_canary_workspace_left_by_a_killed_command_is_reclaimed_by_the_next_worker(tmp_path: Path) -> None:
    parent = tmp_path / "ws"
    # A command killed while its executor canary runs: the folder stays, under the dead pid.
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, sys\n"
            "from pathlib import Path\n"
            "from worker.executor.canary import canary_workspace\n"
            "with canary_workspace(Path(sys.argv[1])) as ws:\n"
            "    (ws / 'half-written').write_text('x')\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n",
            str(parent),
        ],
        cwd=Path(__file__).resolve().parents[1],
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL
    (left,) = parent.iterdir()
    assert left.name.startswith("canary-") and (left / "half-written").exists()
    # One of a command still running (this test's parent stands in for it) is not touched.
    (parent / f"canary-{os.getppid()}-0123abcd").mkdir()
    assert reclaim_leftovers(parent) == 1
    assert [p.name for p in parent.iterdir()] == [f"canary-{os.getppid()}-0123abcd"]


def test_reclaim_also_removes_half_finished_unpacks_of_dead_processes(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    cache = tmp_path / "cache"
    for name in (f".unpack-{dead.pid}-abc", f".unpack-{os.getppid()}-def", "a" * 64):
        (cache / name).mkdir(parents=True)
    assert reclaim_leftovers(tmp_path / "ws", cache_dir=cache) == 1
    assert sorted(p.name for p in cache.iterdir()) == sorted([f".unpack-{os.getppid()}-def", "a" * 64])


def test_the_default_work_root_is_a_roomy_tmpfs_or_the_temp_folder() -> None:
    root = default_work_root()
    assert root.name == "skill-eval"
    assert root.parent in (Path("/dev/shm"), Path(tempfile.gettempdir()))
    if root.parent == Path("/dev/shm"):
        st = os.statvfs("/dev/shm")
        assert st.f_bavail * st.f_frsize >= 2 * 1024**3


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.lists(st.sampled_from([*"ab./*?[]~\\-\x00 ", ".git", "..", "link", "inner", "up"]), max_size=12).map(
        "".join
    )
)
def test_any_fixture_path_is_refused_or_lands_strictly_inside_the_workspace(tmp_path: Path, path: str) -> None:
    root = tmp_path / "root"
    if not root.exists():
        (root / ".git").mkdir(parents=True)
        (root / "inner").mkdir()
        (root / "link").symlink_to(tmp_path)
        (root / "inner" / "up").symlink_to("..")
    root = Path(os.path.realpath(root))
    try:
        dest = resolve_fixture_path(root, 1, 0, path)
    except BadFixture as exc:
        assert str(exc).startswith("BLOCKED_BAD_FIXTURE: case 1: fixtures[0].path")
        return
    assert root in dest.parents
    assert dest.relative_to(root).parts[0] != ".git"
