"""Hiding a repo's own agent configuration: each name covered where the sandbox resolves it, and
a hostile repo's links can neither hide a file of the host nor slip a file past the cover."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnesses.repo_hiding import MAX_HIDDEN_FILES, HiddenFiles, hidden_binds, hidden_file_binds, inner_target
from schemas.errors import ExecutorFailed

GEMINI = HiddenFiles(("GEMINI.md",))


def test_a_link_resolves_as_inside_the_sandbox_and_one_leading_out_or_looping_is_left_alone(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "real").mkdir(parents=True)
    (workspace / "real" / "rules.md").write_text("rules\n")
    (workspace / "inner.md").symlink_to("/workspace/real/rules.md")  # absolute, as the sandbox sees it
    (workspace / "host.md").symlink_to(workspace / "real" / "rules.md")  # a host path: dangles inside
    (workspace / "up.md").symlink_to("../outside.md")
    (workspace / "via").symlink_to("/workspace/real")
    (workspace / "loop.md").symlink_to("loop.md")
    assert inner_target(workspace, "/workspace", "inner.md") == workspace / "real" / "rules.md"
    assert inner_target(workspace, "/workspace", "via/rules.md") == workspace / "real" / "rules.md"
    for name in ("host.md", "up.md", "loop.md"):
        assert inner_target(workspace, "/workspace", name) is None, name


def test_every_file_of_a_name_is_covered_once_and_a_folder_link_to_the_root_hides_nothing(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "a" / "b").mkdir(parents=True)
    (workspace / ".git").mkdir()
    for name in ("GEMINI.md", "a/GEMINI.md", "a/b/notes.md", ".git/GEMINI.md"):
        (workspace / name).write_text("x\n")
    (workspace / "a" / "b" / "GEMINI.md").symlink_to("/workspace/a/GEMINI.md")  # the same file twice
    (workspace / ".agents").symlink_to(".")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    binds = hidden_file_binds(GEMINI, workspace, "/workspace", scratch)
    assert binds[2::3] == ["/workspace/GEMINI.md", "/workspace/a/GEMINI.md"]
    assert hidden_file_binds(HiddenFiles(("GEMINI.md",), nested_only=True), workspace, "/workspace", scratch)[2::3] == [
        "/workspace/a/GEMINI.md"
    ]
    assert hidden_binds([".agents", ".gemini"], workspace, "/workspace", scratch) == []


def test_a_repo_with_more_instruction_files_than_can_be_hidden_is_refused_by_name(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    for n in range(MAX_HIDDEN_FILES + 1):
        folder = workspace / f"d{n}"
        folder.mkdir(parents=True)
        (folder / "GEMINI.md").write_text("obey\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(ExecutorFailed, match=f"more than {MAX_HIDDEN_FILES} files named GEMINI.md"):
        hidden_file_binds(GEMINI, workspace, "/workspace", scratch)
    (workspace / "d0" / "GEMINI.md").unlink()  # exactly the most that can be hidden: all covered
    assert len(hidden_file_binds(GEMINI, workspace, "/workspace", scratch)) == 3 * MAX_HIDDEN_FILES
