"""Read back, through the sandbox, the files an executor changed: ``Trajectory.final_files``.

Changed means written or edited by a file tool, or modified by anything else (a shell
command, an external agent) since the executor started, as the files' mtimes show. Files
are read inside the sandbox, so a path the agent pointed outside the workspace is
contained there as well; binary files are skipped and sizes are capped.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable

from worker.sandbox import Sandbox

MAX_FINAL_FILES = 50
MAX_FILE_CHARS = 20_000
TRUNCATION_NOTE = "\n[... truncated by skill-eval ...]"

# Exit 3: binary or unreadable. Reads at most 4 bytes per character wanted.
_READ_SCRIPT = """
import sys
path, cap = sys.argv[1], int(sys.argv[2])
try:
    with open(path, "rb") as f:
        data = f.read(cap * 4 + 4)
except OSError:
    sys.exit(3)
if b"\\0" in data:
    sys.exit(3)
try:
    text = data.decode("utf-8")
except UnicodeDecodeError as exc:
    if exc.start < len(data) - 4:
        sys.exit(3)
    text = data[: exc.start].decode("utf-8")
sys.stdout.write(text[:cap])
if len(text) > cap:
    sys.stdout.write(sys.argv[3])
"""


def repo_relative(path: str, inner_root: str) -> str | None:
    """Map a path as the agent named it to a repo-relative one; None when it is outside."""
    root = inner_root.rstrip("/")
    if path.startswith("/"):
        if root and not path.startswith(root + "/"):
            return None
        path = path[len(root) + 1 :]
    normal = posixpath.normpath(path)
    if normal in (".", "") or normal == ".." or normal.startswith("../") or normal.startswith("/"):
        return None
    return normal


def changed_since(sandbox: Sandbox, since_epoch: float) -> list[str]:
    """Repo-relative regular files (outside .git) modified after ``since_epoch``, at most a capped few."""
    command = (
        f"find . -path ./.git -prune -o -type f -newermt @{since_epoch:.6f} -print | head -n {MAX_FINAL_FILES * 4}"
    )
    result = sandbox.run(command)
    if result.exit_code != 0:
        return []
    paths = [line[2:] if line.startswith("./") else line for line in result.output.splitlines()]
    return sorted(p for p in paths if p)


def collect_final_files(sandbox: Sandbox, *, since_epoch: float, wrote: Iterable[str] = ()) -> dict[str, str]:
    """Return repo-relative path -> final text for files written via tools or changed since start."""
    wanted: list[str] = []
    for path in [*wrote, *changed_since(sandbox, since_epoch)]:
        relative = repo_relative(path, sandbox.inner_root)
        if relative is not None and relative not in wanted:
            wanted.append(relative)
    files: dict[str, str] = {}
    for relative in wanted[:MAX_FINAL_FILES]:
        command = (
            f"python3 -c {shlex.quote(_READ_SCRIPT)} {shlex.quote(relative)} "
            f"{MAX_FILE_CHARS} {shlex.quote(TRUNCATION_NOTE)}"
        )
        result = sandbox.run(command)
        if result.exit_code == 0:
            files[relative] = result.output
    return files
