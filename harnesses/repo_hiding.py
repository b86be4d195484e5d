"""Hiding a repo's own agent configuration inside the sandbox: the last resort of a harness
that would load it with no switch to stop it (hiding also hides it from the agent's reads).

A folder is covered by an empty read-only folder, a file by an empty read-only file, each bound
over it by bwrap. A name is covered where the sandbox would resolve it: a link is followed as
the harness inside the sandbox would follow it (an absolute target under the workspace's inner
path leads back into the workspace), and one that leads out of the workspace is left alone,
since the sandbox shows nothing of the host there but the read-only system.
"""

from __future__ import annotations

import itertools
import os
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from schemas.errors import ExecutorFailed

MAX_LINKS = 40
"""Links followed in one path before it counts as a loop (the kernel's own limit)."""
MAX_HIDDEN_FILES = 1000
"""Files one shard may cover: each is a bind mount and three sandbox arguments, so a repo holding
tens of thousands of instruction files would otherwise fail the sandbox's start obscurely."""


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


@dataclass(frozen=True)
class HiddenFiles:
    """The files of a repo a harness would read as instructions with no switch to stop it."""

    names: tuple[str, ...]
    nested_only: bool = False
    """Only a subfolder's (the workspace's own are kept out by a switch)."""

    def found(self, root: Path) -> Iterator[Path]:
        """Each file (or link) so named below ``root``, ``.git`` not searched, links to folders
        not followed (a linked folder is searched where it leads, as the folder it leads to)."""
        wanted = frozenset(self.names)
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".git"]
            if self.nested_only and Path(folder) == root:
                continue
            # A link named like an instruction file is listed among the files, or among the
            # folders when it leads to one (then there is nothing to read through it).
            for name in sorted(wanted.intersection(files)):
                yield Path(folder, name)

    def too_many(self, root: Path) -> str | None:
        """Why this repo's files cannot all be hidden (more than :data:`MAX_HIDDEN_FILES`); None when they can."""
        count = sum(1 for _ in itertools.islice(self.found(root), MAX_HIDDEN_FILES + 1))
        if count <= MAX_HIDDEN_FILES:
            return None
        return (
            f"more than {MAX_HIDDEN_FILES} files named {', '.join(self.names)}: they cannot all be hidden "
            "from a harness that would read them as instructions"
        )


def hidden_file_binds(hidden: HiddenFiles, workspace: Path, inner_root: str, scratch: Path) -> list[str]:
    """The bwrap arguments covering every one of ``hidden``'s files in the workspace with an empty
    read-only file, where the sandbox resolves it; ExecutorFailed when there are too many."""
    root = Path(os.path.realpath(workspace))
    why = hidden.too_many(root)
    if why is not None:
        raise ExecutorFailed(f"the repo holds {why}")
    covered: set[Path] = set()
    for path in hidden.found(root):
        real = inner_target(workspace, inner_root, path.relative_to(root).as_posix())
        if real is not None and real.is_file():
            covered.add(real)
    if not covered:
        return []
    empty = scratch / "empty-file"
    empty.touch(mode=0o444, exist_ok=True)
    return [arg for real in sorted(covered) for arg in _bind(empty, real, workspace, inner_root)]
