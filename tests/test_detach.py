"""A detached run: its id alone on stdout, and on stderr where ``report`` will write its reports
(the ``--out`` it was given is recorded with the run, not dropped)."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from pathlib import Path

from engine.records import load_manifest
from engine.redis_server import RedisServer
from engine.store import open_store
from tests.conftest import EXAMPLE_REPO


def test_a_detached_run_says_where_its_reports_will_go(tmp_path: Path, broker: RedisServer) -> None:
    exe = Path(sys.executable).parent / "skill-eval"
    out, store = tmp_path / "mine", tmp_path / "store"
    args = ["run", "commit-message", "--repo", str(EXAMPLE_REPO), "--model", "openai/m", "--judge", "openai/j"]
    args += ["--detach", "--broker", broker.url, "--store", str(store), "--no-preflight", "--out", str(out)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    assert done.stdout == run_id + "\n"  # the id alone, for a script to capture
    said = f"reports: none yet; when the run is done, skill-eval report {run_id} writes them to {out}/"
    assert said in done.stderr
    assert load_manifest(open_store(str(store)), run_id).out_dir == str(out)  # what report reads
    assert not out.exists()


def test_a_detached_run_with_no_worker_says_it_is_waiting(tmp_path: Path, broker: RedisServer) -> None:
    """The preflight waits minutes for a worker that may never come: it says so on stderr after a few
    seconds, and stdout (what a script captures) stays empty until there is a run id to print."""
    exe = Path(sys.executable).parent / "skill-eval"
    args = ["run", "commit-message", "--repo", str(EXAMPLE_REPO), "--model", "openai/m", "--judge", "openai/j"]
    args += ["--detach", "--broker", broker.url, "--store", str(tmp_path / "store")]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.Popen([str(exe), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    try:
        assert proc.stderr is not None
        lines: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(b"waiting for a worker" in line for line in lines):
            if not select.select([proc.stderr], [], [], 1.0)[0]:
                continue
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
        said = b"".join(lines).decode()
        assert "waiting for a worker on queue" in said and "(up to 300 s)" in said, said
    finally:
        proc.terminate()
        stdout, _ = proc.communicate(timeout=30)
    assert stdout == b""
