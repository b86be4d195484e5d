"""Hiding a repo's own agent configuration: each name covered where the sandbox resolves it, and
a hostile repo's links can neither hide a file of the host nor slip a file past the cover."""

from __future__ import annotations

from pathlib import Path

from harnesses.repo_hiding import hidden_binds, hidden_file_binds, inner_target


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
    binds = hidden_file_binds(["GEMINI.md"], workspace, "/workspace", scratch)
    assert binds[2::3] == ["/workspace/GEMINI.md", "/workspace/a/GEMINI.md"]
    assert hidden_file_binds(["GEMINI.md"], workspace, "/workspace", scratch, nested_only=True)[2::3] == [
        "/workspace/a/GEMINI.md"
    ]
    assert hidden_binds([".agents", ".gemini"], workspace, "/workspace", scratch) == []
