"""Untrusted tar archives unpacked into an empty folder, bounded by what they unpack to.

One reader serves the repo archives of ``--repo s3://…/x.tar.gz`` and the worker's snapshot
tars. It reads the archive as a stream (never the whole archive in memory), inflates gzip in
bounded steps, and refuses before a byte of the member is written:

* a name that is absolute, holds ``..`` or goes through a link, and a duplicate name;
* a member whose declared size takes the running total past the cap: the total counts every
  member's size and a block per entry, so what the tree holds is bounded, not the archive;
* a hard link (each would be a full copy of its target here and in every snapshot later),
  a sparse member (its holes would be written out as zeros), a device, fifo or socket.

Symlinks are recreated as links and never followed. Each refusal is raised through the
caller's ``fail(member, why)``, so the caller names the archive in its own error.
"""

from __future__ import annotations

import io
import os
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import BinaryIO

MemberError = Callable[[str, str], Exception]
"""Build the error for a refused member: ``fail(member name, why)``."""

_ENTRY_BYTES = 512  # what one more entry costs, whatever its size: a header block
_CHUNK = 1024 * 1024


class _TooLarge(Exception):
    """The archive's stream went past the cap while tarfile was reading it."""


class _BoundedReader(io.RawIOBase):
    """The archive's bytes (inflated when gzip), at most ``limit`` of them in all."""

    def __init__(self, source: BinaryIO, limit: int, *, gzip: bool) -> None:
        self._source, self._limit, self._seen = source, limit, 0
        self._inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16) if gzip else None
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        want = len(buffer)
        data = self._next(want)
        self._seen += len(data)
        if self._seen > self._limit:
            raise _TooLarge
        buffer[: len(data)] = data
        return len(data)

    def _next(self, want: int) -> bytes:
        if self._inflater is None:
            return self._source.read(want)
        while True:
            if self._pending:
                out = self._inflater.decompress(self._pending, want)
                self._pending = self._inflater.unconsumed_tail
            else:
                out = b""
            if self._inflater.eof and self._inflater.unused_data:  # another gzip member follows
                self._pending = self._inflater.unused_data + self._pending
                self._inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
            if out:
                return out
            if not self._pending:
                self._pending = self._source.read(_CHUNK)
                if not self._pending:
                    return b""


def extract_archive(source: BinaryIO, dest: Path, fail: MemberError, *, max_bytes: int, gzip: bool) -> None:
    """Unpack the tar read from ``source`` (gzip-compressed when ``gzip``) into the empty folder ``dest``.

    ``max_bytes`` bounds both the archive's (inflated) stream and the running total of what
    its members unpack to. A leading ``./`` on names (what ``tar -C dir .`` writes) is accepted.
    Raise ``fail(member, why)`` for the first refused member; ``dest`` may hold earlier members.
    """
    current = ""
    reader = _BoundedReader(source, max_bytes, gzip=gzip)
    try:
        with tarfile.open(fileobj=io.BufferedReader(reader, _CHUNK), mode="r|") as tar:
            unpacker = _Unpacker(dest, fail, max_bytes)
            for member in tar:
                current = member.name
                unpacker.add(tar, member)
            unpacker.finish()
    except _TooLarge:
        raise fail(current or "(archive)", f"larger than the {max_bytes}-byte cap on what it unpacks to") from None
    except (tarfile.TarError, zlib.error, EOFError) as exc:
        raise fail(current or "(archive)", f"not a readable tar archive: {exc}") from None


class _Unpacker:
    """The members seen so far: the folders made here, the running total, the modes set last."""

    def __init__(self, dest: Path, fail: MemberError, max_bytes: int) -> None:
        self.dest, self.fail, self.max_bytes = dest, fail, max_bytes
        self.real_dirs: set[PurePosixPath] = {PurePosixPath(".")}
        self.dir_modes: list[tuple[Path, int]] = []
        self.total = 0

    def add(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        name = member.name
        if name in (".", "./"):
            return
        rel = self._safe_name(name.removeprefix("./"), name)
        self.total += _ENTRY_BYTES + max(member.size, 0)
        if self.total > self.max_bytes:
            raise self.fail(name, f"larger than the {self.max_bytes}-byte cap on what it unpacks to")
        if member.issparse() or member.type == tarfile.GNUTYPE_SPARSE:
            raise self.fail(name, "is a sparse file: its holes would unpack to zeros, refused")
        if member.islnk():
            raise self.fail(name, "is a hard link: refused, each is a full copy (archive with --hard-dereference)")
        if not (member.isdir() or member.issym() or member.isfile()):
            raise self.fail(name, "is not a file, folder or link")
        self._ensure_parent(rel, name)
        host = self.dest / rel
        if member.isdir():
            self._mkdir(rel, host, name)
            self.dir_modes.append((host, member.mode & 0o777))
        elif member.issym():
            try:
                os.symlink(member.linkname, host)  # kept as a link; its target is never opened here
            except FileExistsError:
                raise self.fail(name, "duplicate member") from None
        else:
            self._write(tar, member, host, name)

    def finish(self) -> None:
        for host, mode in reversed(self.dir_modes):  # deepest last-created first, after their content
            os.chmod(host, mode | 0o700)  # the owner keeps write access so the tree can be removed

    def _safe_name(self, name: str, original: str) -> PurePosixPath:
        parts = name.rstrip("/").split("/")
        if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise self.fail(original, "unsafe member name")
        return PurePosixPath(name)

    def _ensure_parent(self, rel: PurePosixPath, name: str) -> None:
        for parent in reversed(rel.parents):  # every parent is a folder made here, never a link
            if parent not in self.real_dirs:
                try:
                    os.mkdir(self.dest / parent, 0o755)
                except FileExistsError:
                    raise self.fail(name, "goes through a link") from None
                self.real_dirs.add(parent)

    def _mkdir(self, rel: PurePosixPath, host: Path, name: str) -> None:
        if rel in self.real_dirs:
            return
        try:
            os.mkdir(host, 0o755)
        except FileExistsError:
            raise self.fail(name, "duplicate member") from None
        self.real_dirs.add(rel)

    def _write(self, tar: tarfile.TarFile, member: tarfile.TarInfo, host: Path, name: str) -> None:
        try:
            fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            raise self.fail(name, "duplicate member") from None
        extracted = tar.extractfile(member)
        left = member.size
        with os.fdopen(fd, "wb") as f:
            while extracted is not None and left > 0:
                chunk = extracted.read(min(left, _CHUNK))
                if not chunk:
                    raise self.fail(name, "truncated: the archive ends inside it")
                f.write(chunk)
                left -= len(chunk)
            os.fchmod(f.fileno(), member.mode & 0o777)
