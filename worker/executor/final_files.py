"""Read back the files an executor changed: ``Trajectory.final_files``.

Changed means written or edited by a file tool, or modified by anything else (a shell
command, an external agent) since the executor started, as the files' mtimes show. Binary
files are skipped and sizes are capped.

The workspace is read on the host, after the executor is done: every sandboxed command has
ended by then (bwrap's PID namespace dies with its init; a root worker also kills the
sandbox's throwaway uid), so nothing of the agent's is left to swap a path while it is read.
The agent can still have left links and special files behind, so the walk never follows a
link, every path component is opened relative to its parent with ``O_NOFOLLOW``, only regular
files are read, and a file the sandbox's uid does not own (a hard link into something else)
is skipped. A path the agent named outside the workspace is never mapped into it.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from worker.sandbox import Sandbox

MAX_FINAL_FILES = 50
MAX_FILE_CHARS = 20_000
TRUNCATION_NOTE = "\n[... truncated by skill-eval ...]"
MAX_WALKED_ENTRIES = 200_000
"""Entries the change listing looks at before it stops (the workspace's own entry quota)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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


def decode_capped(data: bytes, cap: int) -> str | None:
    """At most ``cap`` characters of ``data`` as UTF-8 text (the note appended when cut); None
    when it is binary: a NUL byte, or invalid UTF-8 before the last, possibly cut, character."""
    if b"\0" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(data) - 4:
            return None
        text = data[: exc.start].decode("utf-8")
    return text[:cap] + (TRUNCATION_NOTE if len(text) > cap else "")


def _owner(sandbox: Sandbox) -> int:
    """The uid every file the agent could make is owned by: the sandbox's throwaway uid, or ours."""
    uid = getattr(sandbox, "uid", None)
    return uid if isinstance(uid, int) else os.geteuid()


def changed_since(root: Path, since_epoch: float, *, owner: int, limit: int = MAX_FINAL_FILES * 4) -> list[str]:
    """Repo-relative regular files (outside the top-level .git) modified after ``since_epoch``.

    Never follows a link; stops after ``limit`` files or :data:`MAX_WALKED_ENTRIES` entries.
    """
    found: list[str] = []
    walked = 0
    stack = [""]
    while stack and len(found) < limit and walked < MAX_WALKED_ENTRIES:
        folder = stack.pop()
        try:
            with os.scandir(root / folder if folder else root) as entries:
                listed = list(entries)
        except OSError:
            continue  # a folder the agent made unreadable, or removed meanwhile
        for entry in sorted(listed, key=lambda e: e.name):
            walked += 1
            relative = f"{folder}/{entry.name}" if folder else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if relative != ".git":
                    stack.append(relative)
            elif stat.S_ISREG(st.st_mode) and st.st_mtime > since_epoch and st.st_uid == owner:
                found.append(relative)
    return sorted(found[:limit])


@contextlib.contextmanager
def _opened(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def read_changed_file(root: Path, relative: str, *, owner: int, cap: int = MAX_FILE_CHARS) -> str | None:
    """The capped text of the regular file ``root/relative``; None when it is missing, binary, not a
    regular file, reached through a link at any component, or not owned by ``owner``."""
    *folders, name = relative.split("/")
    try:
        fd = os.open(root, _DIR_FLAGS)
        for folder in folders:
            with _opened(fd) as parent:
                fd = os.open(folder, _DIR_FLAGS, dir_fd=parent)
        with _opened(fd) as parent:
            fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
    except OSError:
        return None  # missing, a link (ELOOP, ENOTDIR), or unreadable
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != owner:
            return None
        try:
            data = f.read(cap * 4 + 4)
        except OSError:
            return None
    return decode_capped(data, cap)


def collect_final_files(sandbox: Sandbox, *, since_epoch: float, wrote: Iterable[str] = ()) -> dict[str, str]:
    """Return repo-relative path -> final text for files written via tools or changed since start.

    Call it only once the executor is done (see the module docstring).
    """
    root = Path(os.path.realpath(sandbox.workspace))
    owner = _owner(sandbox)
    wanted: list[str] = []
    for path in [*wrote, *changed_since(root, since_epoch, owner=owner)]:
        relative = repo_relative(path, sandbox.inner_root)
        if relative is not None and relative not in wanted:
            wanted.append(relative)
    files: dict[str, str] = {}
    for relative in wanted[:MAX_FINAL_FILES]:
        text = read_changed_file(root, relative, owner=owner)
        if text is not None:
            files[relative] = text
    return files
