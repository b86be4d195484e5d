"""Archive bombs through ``--repo s3://…``: what an archive unpacks to is bounded, not its own size.

Each archive is built with Python's tarfile, put on moto's S3 server over HTTP and named to the
real ``skill-eval validate`` command, which must stop with ``BLOCKED_BAD_REPO: <uri>: <member>:
<why>`` (exit 2, no traceback) before the bomb is written:

* one 1 MiB file and 400 hard links to it (each link was written as a full copy: 401 MiB);
* a GNU sparse member whose holes would be written out as zeros;
* a member whose header claims more than the cap, its data never sent (was a crash);
* S3 keys ``evals/x`` and ``evals/x/y`` under a tree prefix are a store error naming the URI.
"""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import boto3
import pytest

from engine.repo_source import MAX_REPO_BYTES, fetch_repo
from schemas.errors import BadRepo
from schemas.status import ExitCode

MiB = 1024 * 1024


def _put(endpoint: str, bucket: str, key: str, body: bytes) -> str:
    s3 = boto3.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    return f"s3://{bucket}/{key}"


def _validate(uri: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "producer", "validate", "--all-evals", "--repo", uri],
        cwd=cwd,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _assert_blocked(result: subprocess.CompletedProcess[str], line: str) -> None:
    assert result.returncode == ExitCode.BLOCKED, (result.returncode, result.stdout, result.stderr)
    assert line in result.stderr, result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def _hardlink_bomb() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        big = tarfile.TarInfo("repo/big.bin")
        big.size = MiB
        tar.addfile(big, io.BytesIO(bytes(MiB)))
        for i in range(400):
            link = tarfile.TarInfo(f"repo/link-{i:03d}")
            link.type, link.linkname = tarfile.LNKTYPE, "repo/big.bin"
            tar.addfile(link)
    return buf.getvalue()


def _sparse_member(name: str, realsize: int) -> bytes:
    """An old-GNU sparse header (type ``S``): one byte of data at the end of ``realsize`` bytes of holes."""
    info = tarfile.TarInfo(name)
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 1
    header = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    header[386:398] = tarfile.itn(realsize - 1, 12, tarfile.GNU_FORMAT)  # first map entry: offset
    header[398:410] = tarfile.itn(1, 12, tarfile.GNU_FORMAT)  # ... and bytes of data there
    header[483:495] = tarfile.itn(realsize, 12, tarfile.GNU_FORMAT)  # the size it unpacks to
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header) + b"x".ljust(512, b"\0")


def _gz(raw: bytes) -> bytes:
    """Raw tar blocks, the end-of-archive blocks after them, gzip-compressed."""
    return gzip.compress(raw + bytes(1024))


def test_a_hardlink_bomb_is_refused_at_the_first_link(aws_env: str, tmp_path: Path) -> None:
    archive = _hardlink_bomb()
    assert len(archive) < 16 * 1024  # a few KiB that used to unpack to 401 MiB
    uri = _put(aws_env, "bomb-links", "x.tar.gz", archive)
    result = _validate(uri, tmp_path)
    _assert_blocked(result, f"BLOCKED_BAD_REPO: {uri}: repo/link-000: is a hard link")


def test_a_sparse_member_is_refused(aws_env: str, tmp_path: Path) -> None:
    archive = _gz(_sparse_member("repo/holes.bin", 64 * MiB))
    assert len(archive) < 4096
    uri = _put(aws_env, "bomb-sparse", "x.tar.gz", archive)
    result = _validate(uri, tmp_path)
    _assert_blocked(result, f"BLOCKED_BAD_REPO: {uri}: repo/holes.bin: is a sparse file")


def test_a_member_claiming_more_than_the_cap_is_refused_before_a_byte_is_written(aws_env: str, tmp_path: Path) -> None:
    huge = tarfile.TarInfo("repo/huge.bin")
    huge.size = MAX_REPO_BYTES + 1
    uri = _put(aws_env, "bomb-claim", "x.tar.gz", _gz(huge.tobuf(tarfile.GNU_FORMAT)))
    result = _validate(uri, tmp_path)
    _assert_blocked(result, f"BLOCKED_BAD_REPO: {uri}: repo/huge.bin: larger than the {MAX_REPO_BYTES}-byte cap")


def test_the_running_total_stops_before_the_member_that_crosses_it(aws_env: str, tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in ("a.bin", "b.bin", "c.bin"):
            info = tarfile.TarInfo(name)
            info.size = 400 * 1024
            tar.addfile(info, io.BytesIO(bytes(info.size)))
    uri = _put(aws_env, "bomb-total", "x.tar.gz", buf.getvalue())
    dest = tmp_path / "r"
    with pytest.raises(BadRepo, match=f"{uri}: c.bin: larger than the {MiB}-byte cap"):
        fetch_repo(uri, dest, max_bytes=MiB)
    assert sorted(p.name for p in dest.iterdir()) == ["a.bin", "b.bin"]  # c.bin: not one byte


def test_s3_keys_that_are_both_a_file_and_a_folder_are_a_store_error_naming_the_uri(
    aws_env: str, tmp_path: Path
) -> None:
    s3 = boto3.client("s3", endpoint_url=aws_env)
    s3.create_bucket(Bucket="clash")
    for key in ("team/repo/evals/x", "team/repo/evals/x/y", "team/repo/README.md"):
        s3.put_object(Bucket="clash", Key=key, Body=b"{}")
    result = _validate("s3://clash/team/repo/", tmp_path)
    assert result.returncode == ExitCode.BLOCKED, result.stderr
    assert "STORE_ERROR: repo 's3://clash/team/repo/': 'evals/x' is both an object and a folder" in result.stderr
    assert "Traceback" not in result.stderr
