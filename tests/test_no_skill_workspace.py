"""The no-skill arm: the skill is absent from the workspace, from git's history and from the prompt."""

from __future__ import annotations

import subprocess
from pathlib import Path

from engine.snapshot import snapshot_repo
from engine.store import LocalStore
from schemas.corpus import EvalCase, Fixture
from schemas.status import FixtureStage
from tests.conftest import git
from worker.executor.prompt import ExecutorInputs, render_executor_prompt
from worker.workspace import materialize_workspace

SKILL = "commit-message"
SECRET = "ZQX-skill-marker-only-in-the-skill-folder"


def _every_object(root: Path) -> bytes:
    """The content of every object git still holds, reachable or not."""
    done = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch", "--unordered"], cwd=root, capture_output=True, check=True
    )
    return done.stdout


def _repo_with_skill_history(example_repo: Path) -> Path:
    skill_md = example_repo / "skills" / SKILL / "SKILL.md"
    skill_md.write_text(skill_md.read_text() + f"\n{SECRET} v1\n")
    git(example_repo, "commit", "-qam", "skill v1")
    git(example_repo, "tag", "v1")
    git(example_repo, "branch", "old-branch")
    skill_md.write_text(skill_md.read_text() + f"\n{SECRET} v2\n")
    git(example_repo, "commit", "-qam", "skill v2")
    skill_md.write_text(skill_md.read_text() + f"\n{SECRET} stashed\n")
    git(example_repo, "stash", "-q")
    skill_md.write_text(skill_md.read_text() + f"\n{SECRET} uncommitted\n")  # WIP in the folder itself
    (example_repo / "README.md").write_text("work in progress\n")
    return example_repo


def test_the_no_skill_workspace_has_no_trace_of_the_skill_in_files_or_history(
    tmp_path: Path, example_repo: Path
) -> None:
    repo = _repo_with_skill_history(example_repo)
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(repo, store)
    case = EvalCase(
        id=3,
        prompt="p",
        expected_output="e",
        files=("README.md",),
        assertions=("a" * 20,),
        fixtures=(Fixture(path="base.txt", content="base\n", stage=FixtureStage.BASE),),
    )
    with materialize_workspace(
        store, key, skill=SKILL, case=case, parent=tmp_path / "ws", cache_dir=tmp_path / "cache", strip_skill=True
    ) as ws:
        assert not (ws.path / "skills" / SKILL).exists()
        assert (ws.path / "skills" / "changelog-entry" / "SKILL.md").exists()  # other skills stay
        assert not (ws.path / "evals" / f"{SKILL}.evals.json").exists()
        assert (ws.path / "README.md").read_text() == "work in progress\n"  # the developer's WIP is kept
        objects = _every_object(ws.path)
        assert SECRET.encode() not in objects
        original = (example_repo / "skills" / SKILL / "SKILL.md").read_text().split(SECRET)[0].strip()
        assert original.encode() not in objects  # nor the skill text as it was before any edit
        log = subprocess.run(
            ["git", "log", "--all", "--format=%s", "--name-only"], cwd=ws.path, capture_output=True, text=True
        )
        assert f"skills/{SKILL}" not in log.stdout and f"evals/{SKILL}.evals.json" not in log.stdout
        # The base fixture is committed on top of the rewritten history, as in every arm.
        assert "base.txt" in log.stdout
        refs = subprocess.run(["git", "for-each-ref"], cwd=ws.path, capture_output=True, text=True).stdout
        assert "stash" not in refs  # the rewritten tag and branch stay, without the skill
        status = subprocess.run(["git", "status", "--porcelain"], cwd=ws.path, capture_output=True, text=True)
        assert f"skills/{SKILL}" not in status.stdout  # not shown as a deletion either


def test_the_other_arms_keep_the_skill_and_its_history(tmp_path: Path, example_repo: Path) -> None:
    repo = _repo_with_skill_history(example_repo)
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(repo, store)
    case = EvalCase(id=3, prompt="p", expected_output="e", files=(), assertions=("a" * 20,))
    with materialize_workspace(
        store, key, skill=SKILL, case=case, parent=tmp_path / "ws", cache_dir=tmp_path / "cache"
    ) as ws:
        assert SECRET in (ws.path / "skills" / SKILL / "SKILL.md").read_text()
        assert (
            "skill v1"
            in subprocess.run(["git", "log", "--format=%s"], cwd=ws.path, capture_output=True, text=True).stdout
        )


def test_a_link_in_the_repos_git_folder_is_not_followed_when_the_history_is_rewritten(
    tmp_path: Path, example_repo: Path
) -> None:
    outside = tmp_path / "host-secret"
    outside.write_text("host file")
    (example_repo / ".git" / "shallow").symlink_to(outside)
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(example_repo, store)
    case = EvalCase(id=3, prompt="p", expected_output="e", files=(), assertions=("a" * 20,))
    with materialize_workspace(
        store, key, skill=SKILL, case=case, parent=tmp_path / "ws", cache_dir=tmp_path / "cache", strip_skill=True
    ) as ws:
        assert not (ws.path / "skills" / SKILL).exists()
    assert outside.read_text() == "host file"


def test_the_no_skill_prompt_is_the_bare_case_prompt() -> None:
    case = EvalCase(
        id=1, prompt="Write the release notes", expected_output="e", files=("CHANGELOG.md",), assertions=("a" * 20,)
    )
    bare = render_executor_prompt(ExecutorInputs("commit-message", None, {"x.md": "agent"}, case), workspace="/w")
    full = render_executor_prompt(ExecutorInputs("commit-message", "SKILL BODY", {}, case), workspace="/w")
    assert "Write the release notes" in bare.text and "CHANGELOG.md" in bare.text
    assert "commit-message" not in bare.text and "skill" not in bare.text.lower().replace("skill-eval", "")
    assert "agent\n" not in bare.text and "SKILL BODY" in full.text
    assert bare.template_sha256 != full.template_sha256
