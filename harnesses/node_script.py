"""The sandbox set-up of a harness shipped as a node script (Gemini CLI), and the
hiding of a repo's own configuration folders and files, which native harnesses use too.

Such a package is a script with its chunks beside it, not one native binary: its folder is
bound read-only inside the sandbox and the host's node runs it, sealed execute-only like the
native harnesses (so the process is non-dumpable). The repo's own configuration folders of the
harness are hidden under an empty read-only folder, so nothing the repo ships there applies.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from collections.abc import Iterable
from pathlib import Path

from schemas.errors import NoHarness


def node_script_runtime(
    name: str,
    package: Path,
    inner_package: str,
    hidden: Iterable[str],
    workspace: Path,
    inner_root: str,
    scratch: Path,
) -> tuple[Path, list[str]]:
    """The host's node (to seal) and the bwrap arguments: ``package`` bound read-only at
    ``inner_package``, each of the repo's ``hidden`` folders covered by an empty read-only one."""
    node = shutil.which("node")
    if node is None:
        raise NoHarness(f"{name}: node is not on PATH; its package is a node script")
    return Path(os.path.realpath(node)), [
        "--ro-bind",
        str(package),
        inner_package,
        *hidden_binds(hidden, workspace, inner_root, scratch),
    ]


def hidden_binds(hidden: Iterable[str], workspace: Path, inner_root: str, scratch: Path) -> list[str]:
    """The bwrap arguments covering each of the repo's ``hidden`` folders (workspace-relative)
    with an empty read-only one. A hidden name that is a symlink leading out of the workspace is
    left alone: the sandbox does not show what lies outside the workspace anyway."""
    empty = scratch / "empty"
    empty.mkdir(mode=0o555, exist_ok=True)
    binds: list[str] = []
    root = os.path.realpath(workspace)
    for folder in hidden:
        real = Path(os.path.realpath(workspace / folder))
        if real.is_dir() and real.is_relative_to(root):
            binds += ["--ro-bind", str(empty), posixpath.join(inner_root, real.relative_to(root).as_posix())]
    return binds


def nested_file_binds(names: Iterable[str], workspace: Path, inner_root: str, scratch: Path) -> list[str]:
    """The bwrap arguments covering each file named one of ``names`` in a subfolder of the
    workspace (not at its root) with an empty read-only file: the last resort for a harness that
    loads such files into its prompt with no switch to stop it. A link is covered where it leads
    inside the workspace (what the harness would read through it); one leading out is left alone,
    as the sandbox shows nothing of the host but the read-only system. ``.git`` is not searched."""
    wanted = frozenset(names)
    empty = scratch / "empty-file"
    root = os.path.realpath(workspace)
    covered: set[Path] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        if folder == root:
            continue
        for name in wanted.intersection(files):
            real = Path(os.path.realpath(os.path.join(folder, name)))
            if real.is_file() and real.is_relative_to(root):
                covered.add(real)
    if not covered:
        return []
    empty.touch(mode=0o444, exist_ok=True)
    binds: list[str] = []
    for real in sorted(covered):
        binds += ["--ro-bind", str(empty), posixpath.join(inner_root, real.relative_to(root).as_posix())]
    return binds
