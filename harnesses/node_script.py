"""The sandbox set-up of a harness shipped as a node script (Gemini CLI).

Such a package is a script with its chunks beside it, not one native binary: its folder is
bound read-only inside the sandbox and the host's node runs it, sealed execute-only like the
native harnesses (so the process is non-dumpable). The repo's own configuration folders of the
harness are hidden under an empty read-only folder (:mod:`harnesses.repo_hiding`), so nothing
the repo ships there applies.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from harnesses.repo_hiding import hidden_binds
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
