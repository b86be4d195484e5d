"""Attack: the files an agent leaves behind make the host read outside the workspace.

After the executor is done the worker reads the changed files on the host. The agent, in the
sandbox, can leave a symlink whose target does not exist inside the sandbox but does on the
host, a linked folder, a FIFO that would block a naive reader, and a claim (a write tool's
path) naming any of them. None of it may put a host file's text into the trajectory, and the
listing must finish.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from schemas.trajectory import Trajectory
from tests.executor_support import open_test_sandbox
from worker.executor.final_files import changed_since, collect_final_files, read_changed_file
from worker.executor.tools import execute_tool
from worker.sandbox import SandboxLimits

SECRET = "HOST-SECRET-5d0e"


def test_links_fifos_and_claims_left_by_the_agent_never_read_the_host(tmp_path: Path, example_repo: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text(f"{SECRET}\n")
    sandbox = open_test_sandbox(example_repo, SandboxLimits(timeout_s=10))
    since = time.time()
    time.sleep(0.02)
    # Inside the sandbox these host paths do not exist: the links dangle there, not on the host.
    script = (
        f"ln -s {host}/secret.txt leak.txt && ln -s {host} hostdir && mkdir -p real && "
        f"echo inside > real/kept.txt && ln -s real linked && mkfifo pipe.txt && ln -s /proc/1/environ env.txt"
    )
    outcome = execute_tool(sandbox, "shell", {"command": script})
    assert outcome.exit_code == 0, outcome.output

    claims = ["leak.txt", "hostdir/secret.txt", "linked/kept.txt", "pipe.txt", "env.txt", f"{host}/secret.txt"]
    started = time.monotonic()
    files = collect_final_files(sandbox, since_epoch=since, wrote=claims)

    assert time.monotonic() - started < 5  # the FIFO was never opened for a blocking read
    assert files == {"real/kept.txt": "inside\n"}  # through no link, at no component
    assert all(SECRET not in text for text in files.values())


def test_a_file_the_sandbox_s_uid_does_not_own_is_not_read(tmp_path: Path) -> None:
    """A hard link into a file from elsewhere keeps that file's owner; the sandbox's own files do not."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "mine.txt").write_text("agent's\n")
    me = os.geteuid()

    assert read_changed_file(root, "mine.txt", owner=me) == "agent's\n"
    assert read_changed_file(root, "mine.txt", owner=me + 1) is None
    assert changed_since(root, 0.0, owner=me + 1) == []
    assert changed_since(root, 0.0, owner=me) == ["mine.txt"]


def test_a_file_name_that_is_not_utf8_still_gives_a_trajectory_that_stores(example_repo: Path) -> None:
    """A name the agent chose to be undecodable must not turn its shard into an evaluator crash."""
    sandbox = open_test_sandbox(example_repo, SandboxLimits(timeout_s=10))
    since = time.time()
    time.sleep(0.02)
    outcome = execute_tool(sandbox, "shell", {"command": "printf 'odd\\n' > $'bad\\xff\\xfe.txt'"})
    assert outcome.exit_code == 0, outcome.output

    files = collect_final_files(sandbox, since_epoch=since)
    stored = Trajectory(skill="s", case_id=1, model="m", events=[], final_files=files).model_dump_json()

    assert list(files.values()) == ["odd\n"]
    assert Trajectory.model_validate_json(stored).final_files  # it round-trips through the store's JSON
