"""``skill-eval grade --trajectories`` reads only regular files, each bounded before it is read.

A FIFO named ``case-2.json`` hung the command forever; a sparse file of gigabytes was read
whole before it was refused; a device never ended. Each is now a ``CONFIG_ERROR`` naming the
file, at once, in a folder and as the single-file form. The names are ASCII digits with a
bounded epoch, a linked skill folder is named, and thousands of stray files make 20 warnings.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engine.importers import MAX_EPOCH, MAX_RECORDING_BYTES, load_trajectories, parse_key
from producer.launch.grade_only import MAX_PRINTED_WARNINGS
from schemas.errors import ConfigError
from tests.grading_support import good_trajectory

GRADE = [sys.executable, "-m", "producer", "grade"]


def _grade(trajectories: Path, repo: Path) -> subprocess.CompletedProcess[str]:
    """The real command, under a timeout far above the instant refusal expected (a hang fails)."""
    return subprocess.run(
        [*GRADE, "--trajectories", str(trajectories), "--repo", str(repo), "--judge", "openai/judge"],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "repo").mkdir()
    (tmp_path / "recorded" / "demo").mkdir(parents=True)
    return tmp_path / "recorded"


@pytest.mark.parametrize("single", [False, True], ids=["folder", "single-file"])
def test_a_fifo_recording_is_refused_by_name_without_a_hang(root: Path, single: bool) -> None:
    fifo = root / "demo" / "case-2.json"
    os.mkfifo(fifo)
    done = _grade(fifo if single else root, root.parent / "repo")
    assert done.returncode == 2
    assert "case-2.json: is a FIFO; recorded trajectories are read only as regular files" in done.stderr


@pytest.mark.parametrize("single", [False, True], ids=["folder", "single-file"])
def test_a_sparse_recording_past_the_limit_is_refused_before_it_is_read(root: Path, single: bool) -> None:
    huge = root / "demo" / "case-2.json"
    huge.touch()
    os.truncate(huge, 3 * 1024**3)  # sparse: no disk, and reading it whole was gigabytes resident
    done = _grade(huge if single else root, root.parent / "repo")
    assert done.returncode == 2
    assert f"case-2.json: larger than {MAX_RECORDING_BYTES} bytes" in done.stderr


def test_a_device_recording_is_refused_by_name(root: Path) -> None:
    try:
        os.mknod(root / "demo" / "case-1.json", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero
    except PermissionError:
        pytest.skip("making a device needs privilege here")
    with pytest.raises(ConfigError, match=r"demo/case-1\.json: is a device"):
        load_trajectories(root)


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("case-1.epoch-\u0661.json", "must be <skill>/case-<id>"),  # an Arabic-Indic digit one
        ("case-\u0661.json", "must be <skill>/case-<id>"),
        (f"case-1.epoch-{MAX_EPOCH + 1}.json", f"epoch {MAX_EPOCH + 1} is past {MAX_EPOCH}"),
        ("case-1.epoch-" + "9" * 5000 + ".json", f"is past {MAX_EPOCH}"),
        ("case-" + "1" * 5000 + ".json", "a case id of 5000 digits"),
    ],
)
def test_a_recording_name_is_ascii_digits_with_bounded_numbers(name: str, needle: str) -> None:
    with pytest.raises(ConfigError, match="demo/case-") as caught:
        parse_key(f"demo/{name}")
    assert needle in str(caught.value) and len(str(caught.value)) < 400 + len(name)


def test_the_largest_epoch_is_still_read() -> None:
    assert parse_key(f"demo/case-1.epoch-{MAX_EPOCH}.json") == ("demo", 1, MAX_EPOCH, "json")


def test_thousands_of_ignored_files_print_a_bounded_warning(root: Path) -> None:
    demo = good_trajectory().model_copy(update={"skill": "demo", "case_id": 1}).model_dump_json()
    (root / "demo" / "case-1.json").write_text(demo)
    for n in range(MAX_PRINTED_WARNINGS + 500):
        (root / "demo" / f"note-{n}.txt").write_text("x")
    done = _grade(root, root.parent / "repo")
    ignored = [line for line in done.stderr.splitlines() if "ignored, not a recording" in line]
    assert len(ignored) == MAX_PRINTED_WARNINGS, done.stderr[-2000:]
    assert "... and 500 more like these, not shown" in done.stderr
