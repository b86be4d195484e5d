"""Repo snapshots are content-addressed and deterministic; unpacking trusts nothing in the tar."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import threading
from pathlib import Path

import pytest

from engine.snapshot import build_snapshot_tar, snapshot_repo, unpack_snapshot
from engine.store import LocalStore
from schemas.errors import StoreError


def _tree(root: Path) -> Path:
    (root / "src" / "deep" / "node_modules").mkdir(parents=True)
    (root / "src" / "deep" / "node_modules" / "x.js").write_text("heavy")
    (root / "src" / "a.py").write_text("print('a')\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "cache").mkdir()
    (root / "cache" / "big.bin").write_bytes(b"\0" * 1000)
    (root / "link").symlink_to("src/a.py")
    return root


def test_the_same_tree_gives_the_same_bytes_whatever_its_mtimes(tmp_path: Path) -> None:
    a = _tree(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b, symlinks=True)
    os.utime(b / "src" / "a.py", (1, 1))
    assert build_snapshot_tar(a) == build_snapshot_tar(b)
    (b / "src" / "a.py").write_text("print('b')\n")
    assert build_snapshot_tar(a) != build_snapshot_tar(b)


def test_heavy_folders_are_left_out_at_any_depth_plus_a_configurable_list(tmp_path: Path) -> None:
    root = _tree(tmp_path / "r")
    with tarfile.open(fileobj=io.BytesIO(build_snapshot_tar(root, exclude=("cache",)))) as tar:
        names = tar.getnames()
    assert "src/a.py" in names and ".git/HEAD" in names and "link" in names
    assert not any("node_modules" in n or n.startswith("cache") for n in names)
    assert all(names.index(str(Path(n).parent)) < i for i, n in enumerate(names) if "/" in n)  # parents first


def test_a_snapshot_is_keyed_by_its_hash_and_uploaded_once(tmp_path: Path) -> None:
    root = _tree(tmp_path / "r")
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(root, store)
    digest = hashlib.sha256(store.get(key)).hexdigest()
    assert key == f"snapshots/{digest}.tar"
    stamp = (tmp_path / "store" / key).stat().st_mtime_ns
    assert snapshot_repo(root, store) == key
    assert (tmp_path / "store" / key).stat().st_mtime_ns == stamp


def test_unpacking_restores_files_modes_and_symlinks(tmp_path: Path) -> None:
    root = _tree(tmp_path / "r")
    store = LocalStore(tmp_path / "store")
    tree = unpack_snapshot(store, snapshot_repo(root, store), tmp_path / "cache")
    assert (tree / "src" / "a.py").read_text() == "print('a')\n"
    assert os.access(tree / "run.sh", os.X_OK)
    assert os.readlink(tree / "link") == "src/a.py"
    assert (tree / ".git" / "HEAD").exists()


def test_concurrent_unpacks_of_one_key_publish_one_complete_tree(tmp_path: Path) -> None:
    root = _tree(tmp_path / "r")
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(root, store)
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(unpack_snapshot(store, key, tmp_path / "cache")))
        for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1 and len(results) == 6
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [results[0].name]  # no temp dirs left


def _store_with(tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> tuple[LocalStore, str]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    payload = buf.getvalue()
    key = f"snapshots/{hashlib.sha256(payload).hexdigest()}.tar"
    store = LocalStore(tmp_path / "store")
    store.put(key, payload)
    return store, key


def _info(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o644
    return info


@pytest.mark.parametrize(
    ("members", "problem"),
    [
        ([(_info("/etc/evil"), b"x")], "unsafe member name"),
        ([(_info("../evil"), b"x")], "unsafe member name"),
        ([(_info("a/../../evil"), b"x")], "unsafe member name"),
        ([(_info("out", tarfile.SYMTYPE, "/tmp"), None), (_info("out/evil"), b"x")], "goes through a link"),
        ([(_info("up", tarfile.SYMTYPE, ".."), None), (_info("up/evil"), b"x")], "goes through a link"),
        ([(_info("h", tarfile.LNKTYPE, "../../etc/passwd"), None)], "is a hard link"),
        ([(_info("h", tarfile.LNKTYPE, "never-seen"), None)], "is a hard link"),
        ([(_info("a"), b"1"), (_info("a"), b"2")], "duplicate member"),
        ([(_info("dev", tarfile.CHRTYPE), None)], "not a file, folder or link"),
    ],
)
def test_unsafe_tar_members_are_refused_and_leave_nothing_cached(
    tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], problem: str
) -> None:
    store, key = _store_with(tmp_path, members)
    with pytest.raises(StoreError, match=problem):
        unpack_snapshot(store, key, tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []
    assert not Path("/tmp/evil").exists() and not (tmp_path / "evil").exists()


def test_an_outside_symlink_is_kept_as_a_link_and_never_followed(tmp_path: Path) -> None:
    store, key = _store_with(tmp_path, [(_info("out", tarfile.SYMTYPE, str(tmp_path / "target")), None)])
    tree = unpack_snapshot(store, key, tmp_path / "cache")
    assert os.readlink(tree / "out") == str(tmp_path / "target")
    assert not (tmp_path / "target").exists()


def test_a_snapshot_whose_bytes_do_not_match_its_key_is_refused(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    key = "snapshots/" + "a" * 64 + ".tar"
    store.put(key, b"not what the key promises")
    with pytest.raises(StoreError, match="corrupt"):
        unpack_snapshot(store, key, tmp_path / "cache")
    with pytest.raises(StoreError, match="invalid snapshot key"):
        unpack_snapshot(store, "runs/x.tar", tmp_path / "cache")
