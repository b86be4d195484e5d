"""The empty HOME git runs with on the host is removed when the process exits: each command
once left one ``skill-eval-githome-*`` folder behind in TMPDIR."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.security.harness import case, make_repo

PROGRAM = """
import os, sys
from pathlib import Path
from engine.gitcmd import git_env, run_git
home = git_env()["HOME"]
assert os.path.isdir(home) and run_git(Path(sys.argv[1]), ["rev-parse", "HEAD"]).strip()
print(home)
"""


def test_the_git_home_of_a_process_is_gone_when_it_exits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "demo", [case(1, "p", ["runs git status first"])])
    temp = tmp_path / "tmp"
    temp.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(repo)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(temp)},
        check=True,
    )
    home = Path(done.stdout.strip())
    assert home.parent == temp and home.name.startswith("skill-eval-githome-")
    assert list(temp.iterdir()) == []
