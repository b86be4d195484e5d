"""Content-addressed repo snapshots: one deterministic tar per tree, unpacked once per host.

``snapshot_repo`` (producer side) tars the working tree as it is on disk, uncommitted and
untracked files and ``.git`` included, heavy folders left out, and stores it under
``snapshots/<sha256>.tar``. The same tree always gives the same bytes (sorted entries,
fixed mtime, uid, gid and owner names), so the key is a content hash and a re-upload is
skipped. ``unpack_snapshot`` (worker side) checks the hash, then unpacks into a per-key
cache folder through a temp folder and one ``rename``, so concurrent workers on a host
never see half a tree and the loser of a race simply uses the winner's copy.

Extraction trusts nothing in the tar (:mod:`engine.archive`): absolute names, ``..``,
duplicate names, device files, hard links and sparse members are refused (``StoreError``),
and the tree is bounded by the tar's own length; symlinks are recreated as
symlinks and never followed while extracting (a later member under a symlinked folder
is refused). Before the unpacked tree is published its ``.git`` is neutralised
(:func:`engine.gitcmd.neutralise_git_dir`): nothing in the cache can make host-side git
run a command. See docs/design/sandbox.md and docs/design/threat-model.md.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from engine.archive import extract_archive
from engine.gitcmd import neutralise_git_dir
from engine.store import ArtifactStore
from schemas.constants import HEAVY_DIRS
from schemas.errors import StoreError

SNAPSHOT_PREFIX = "snapshots/"
# Fixed metadata so the tar depends on content, names and permissions only.
_FIXED_MTIME = 946_684_800  # 2000-01-01; some tools reject pre-1980 timestamps
UNPACK_TEMP_PREFIX = ".unpack-"  # + "<pid>-<random>": lets a restarted worker reclaim a killed unpack
_KEY_RE = re.compile(r"^snapshots/([0-9a-f]{64})\.tar$")


def _walk(root: Path, excluded: frozenset[str]) -> Iterator[tuple[str, os.stat_result]]:
    """Yield ``(relative posix path, lstat)`` of every entry under ``root``, sorted, pruning ``excluded``."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(root / rel_dir if rel_dir else root) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if entry.name in excluded:
                    continue
                yield rel, st
                subdirs.append(rel)
            else:
                yield rel, st
        # Depth-first in name order: push reversed so the smallest name is visited first.
        stack.extend(reversed(subdirs))


def build_snapshot_tar(root: Path, *, exclude: Sequence[str] = HEAVY_DIRS) -> bytes:
    """Return the deterministic tar of ``root`` (see module docstring); sockets and devices are skipped."""
    excluded = frozenset(HEAVY_DIRS) | frozenset(exclude)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for rel, st in _walk(root, excluded):
            info = tarfile.TarInfo(rel)
            info.mtime, info.uid, info.gid, info.uname, info.gname = _FIXED_MTIME, 0, 0, "", ""
            info.mode = stat.S_IMODE(st.st_mode) & 0o777  # never carry setuid/setgid bits
            path = root / rel
            if stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif stat.S_ISLNK(st.st_mode):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, os.readlink(path), 0o777
                tar.addfile(info)
            elif stat.S_ISREG(st.st_mode):
                info.size = st.st_size
                with open(path, "rb") as f:
                    tar.addfile(info, f)
    return buf.getvalue()


def snapshot_repo(root: Path, store: ArtifactStore, *, exclude: Sequence[str] = HEAVY_DIRS) -> str:
    """Snapshot the tree at ``root`` into ``store``; return its key ``snapshots/<sha256>.tar``.

    Folders named in :data:`HEAVY_DIRS` or ``exclude`` are left out at any depth. The upload
    is skipped when the key already exists. Raise ``StoreError`` when the store fails and
    ``OSError`` when ``root`` cannot be read.
    """
    data = build_snapshot_tar(Path(root), exclude=exclude)
    key = f"{SNAPSHOT_PREFIX}{hashlib.sha256(data).hexdigest()}.tar"
    if not store.exists(key):
        store.put(key, data)
    return key


def copy_tree(src: Path, dest: Path) -> None:
    """Copy ``src`` to the new folder ``dest``, keeping modes and symlinks as symlinks.

    ``cp -a`` reflinks where the filesystem can. Hardlinks would be faster but are wrong: the
    agent edits files in place, which would change the shared cache and every later copy.
    """
    subprocess.run(
        ["cp", "-a", "--reflink=auto", "--no-target-directory", str(src), str(dest)],
        check=True,
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
    )


def _neutralise(tree: Path) -> None:
    """Before the tree is published: a ``.git`` file or link (a worktree or submodule pointing
    outside) is deleted, and a ``.git`` folder is made safe for host-side git."""
    dot_git = tree / ".git"
    if dot_git.is_symlink() or (os.path.lexists(dot_git) and not dot_git.is_dir()):
        dot_git.unlink()
    elif dot_git.is_dir():
        neutralise_git_dir(dot_git)


def _digest_of(key: str) -> str:
    match = _KEY_RE.match(key)
    if not match:
        raise StoreError(f"invalid snapshot key {key!r}: expected snapshots/<sha256>.tar")
    return match.group(1)


def unpack_snapshot(store: ArtifactStore, key: str, cache_dir: Path) -> Path:
    """Return the folder holding the unpacked tree of snapshot ``key``, unpacking it at most once.

    The folder is ``cache_dir/<sha256>`` and must be treated as read-only (workspaces copy
    it). Raise ``StoreError`` when the snapshot is missing, its bytes do not hash to its
    key, or a member is unsafe; a failed unpack leaves no partial cache entry.
    """
    digest = _digest_of(key)
    target = Path(cache_dir) / digest
    if target.is_dir():
        return target
    data = store.get(key)
    if hashlib.sha256(data).hexdigest() != digest:
        raise StoreError(f"snapshot {key!r} is corrupt: its bytes do not hash to its key")
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=f"{UNPACK_TEMP_PREFIX}{os.getpid()}-"))
    except OSError as exc:
        raise StoreError(f"cannot unpack {key!r} into {cache_dir}: {exc}") from exc
    try:
        extract_tar(data, tmp, key)
        _neutralise(tmp)
        os.rename(tmp, target)  # atomic publish; fails when another worker published first
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if target.is_dir():
            return target
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def extract_tar(data: bytes, dest: Path, key: str) -> None:
    """Extract the snapshot tar ``data`` into the empty folder ``dest`` without ever following a link.

    ``key`` names the snapshot in errors. Every unsafe member is a ``StoreError``
    (:func:`engine.archive.extract_archive`); a plain tar unpacks to no more than its own length.
    """

    def fail(member: str, why: str) -> Exception:
        return StoreError(f"snapshot {key!r}: member {member!r}: {why}")

    extract_archive(io.BytesIO(data), dest, fail, max_bytes=len(data), gzip=False)
