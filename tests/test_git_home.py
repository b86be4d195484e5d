"""git on the host runs with a HOME nothing can be read from or left in: no user's git
configuration, ignore or attributes file reaches a repo's commands, and a process killed with
SIGKILL (no exit hooks) leaves no folder behind in TMPDIR."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from engine.gitcmd import git_env, run_git, run_in_git_env
from tests.security.harness import case, make_repo

PROGRAM = """
import os, signal, sys
from pathlib import Path
from engine.gitcmd import run_git
print(run_git(Path(sys.argv[1]), ["rev-parse", "HEAD"]).strip(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_process_leaves_nothing_in_tmpdir(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "demo", [case(1, "p", ["runs git status first"])])
    temp = tmp_path / "tmp"
    temp.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(repo)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(temp)},
        check=False,
    )
    assert done.returncode == -signal.SIGKILL and len(done.stdout.strip()) == 40, done.stderr
    assert list(temp.iterdir()) == []


def test_no_file_under_the_users_home_reaches_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "demo", [case(1, "p", ["runs git status first"])])
    (repo / "notes.tmp").write_text("x\n", encoding="utf-8")
    home = Path(git_env()["HOME"])
    assert not home.is_dir()  # nothing can be created below it
    user_home = tmp_path / "home"
    (user_home / ".config" / "git").mkdir(parents=True)
    (user_home / ".config" / "git" / "ignore").write_text("*.tmp\n", encoding="utf-8")
    (user_home / ".gitconfig").write_text("[core]\n\texcludesFile = ~/.config/git/ignore\n", encoding="utf-8")
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(user_home)
    try:
        listed = run_git(repo, ["status", "--porcelain", "--untracked-files=all"])
        done = run_in_git_env(["git", "status", "--porcelain"], repo, timeout_s=60)
    finally:
        if old is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = old
    assert "notes.tmp" in listed  # the user's ignore file was not read
    assert done.returncode == 0 and done.stderr == b""  # and git warned of nothing
