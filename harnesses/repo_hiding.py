"""Hiding a repo's own agent configuration inside the sandbox: the last resort of a harness
that would load it with no switch to stop it (hiding also hides it from the agent's reads).

A folder is covered by an empty read-only folder, a file by an empty read-only file, each bound
over it by bwrap. A name is covered where the sandbox would resolve it: a link is followed as
the harness inside the sandbox would follow it (an absolute target under the workspace's inner
path leads back into the workspace), and one that leads out of the workspace is left alone,
since the sandbox shows nothing of the host there but the read-only system.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from pathlib import Path

MAX_LINKS = 40
"""Links followed in one path before it counts as a loop (the kernel's own limit)."""


def inner_target(workspace: Path, inner_root: str, relative: str) -> Path | None:
    """The host path that workspace-relative ``relative`` names inside the sandbox, where the
    workspace is seen at ``inner_root``: every link on the way followed as the sandbox would.
    None when it leads out of the workspace or loops."""
    root = os.path.realpath(workspace)
    inner = inner_root.rstrip("/")
    parts = [p for p in relative.split("/") if p]
    resolved: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            if not resolved:
                return None
            resolved.pop()
            continue
        host = os.path.join(root, *resolved, part)
        if not os.path.islink(host):
            resolved.append(part)
            continue
        links += 1
        if links > MAX_LINKS:
            return None
        target = os.readlink(host)
        if target.startswith("/"):
            if target != inner and not target.startswith(inner + "/"):
                return None
            resolved, target = [], target[len(inner) :]
        parts = [p for p in target.split("/") if p] + parts
    return Path(root, *resolved)


def _bind(source: Path, target: Path, workspace: Path, inner_root: str) -> list[str]:
    relative = target.relative_to(os.path.realpath(workspace)).as_posix()
    return ["--ro-bind", str(source), posixpath.join(inner_root, relative)]


def hidden_binds(hidden: Iterable[str], workspace: Path, inner_root: str, scratch: Path) -> list[str]:
    """The bwrap arguments covering each of the repo's ``hidden`` folders (workspace-relative)
    with an empty read-only one, where the sandbox resolves it."""
    empty = scratch / "empty"
    empty.mkdir(mode=0o555, exist_ok=True)
    binds: list[str] = []
    for folder in hidden:
        real = inner_target(workspace, inner_root, folder)
        if real is not None and real.is_dir() and real != Path(os.path.realpath(workspace)):
            binds += _bind(empty, real, workspace, inner_root)
    return binds


def hidden_file_binds(
    names: Iterable[str], workspace: Path, inner_root: str, scratch: Path, *, nested_only: bool = False
) -> list[str]:
    """The bwrap arguments covering every file of the workspace named one of ``names`` (in a
    subfolder only, with ``nested_only``) with an empty read-only file, where the sandbox
    resolves it. ``.git`` is not searched; a linked folder is searched where it leads, as the
    folder it leads to."""
    wanted = frozenset(names)
    root = os.path.realpath(workspace)
    covered: set[Path] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        if nested_only and folder == root:
            continue
        # A link named like an instruction file is listed among the files, or among the folders
        # when it leads to one (then there is nothing to read through it).
        for name in wanted.intersection(files):
            relative = Path(folder, name).relative_to(root).as_posix()
            real = inner_target(workspace, inner_root, relative)
            if real is not None and real.is_file():
                covered.add(real)
    if not covered:
        return []
    empty = scratch / "empty-file"
    empty.touch(mode=0o444, exist_ok=True)
    return [arg for real in sorted(covered) for arg in _bind(empty, real, workspace, inner_root)]
