"""Benchmark: materializing a workspace from a cached snapshot, and one sandboxed ``true``.

Builds a git repo of about 1,000 files and 13 MB in a temp folder, snapshots it into a
local store, unpacks it once (the per-host cache), then measures

* materializing a workspace (copy + harden: corpus removed, remotes removed), median of N;
* one sandboxed ``true`` command in bubblewrap, median of M.

Targets: workspace <= 150 ms, sandboxed command <= 20 ms.

Run: ``.venv/bin/python bench/bench_workspace.py [--workspaces 30] [--commands 50]``
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.snapshot import snapshot_repo, unpack_snapshot
from engine.store import LocalStore
from schemas.corpus import EvalCase
from schemas.status import SandboxMode
from worker.sandbox import open_sandbox
from worker.workspace import materialize_workspace

TARGET_WORKSPACE_MS = 150.0
TARGET_COMMAND_MS = 20.0


def build_repo(root: Path, files: int = 1000, total_bytes: int = 13 * 1024 * 1024) -> None:
    """A git repo with ``files`` files summing to ``total_bytes``, committed and packed, with a remote."""
    rng = random.Random(42)
    per_file = total_bytes // files
    for i in range(files):
        path = root / f"pkg{i % 25:02d}" / f"sub{i % 7}" / f"file{i:04d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        # Mildly compressible text, like source code.
        words = [f"token{rng.randrange(5000)}" for _ in range(per_file // 10)]
        path.write_text(" ".join(words)[:per_file])
    (root / "evals").mkdir()
    (root / "evals" / "demo.evals.json").write_text("{}")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@b",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@b",
    }
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["commit", "-qm", "bench"],
        ["gc", "-q"],
        ["remote", "add", "origin", "https://example.invalid/r.git"],
    ):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)


def tree_stats(root: Path) -> tuple[int, int]:
    count = size = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            count += 1
            size += os.lstat(os.path.join(dirpath, name)).st_size
    return count, size


def bench_location(store: LocalStore, key: str, where: Path, n_ws: int, n_cmd: int) -> tuple[float, float]:
    """Cache and workspaces under ``where``; return (workspace median ms, command median ms)."""
    cache, parent = where / "cache", where / "ws"
    started = time.perf_counter()
    tree = unpack_snapshot(store, key, cache)
    unpack_ms = (time.perf_counter() - started) * 1000
    files, size = tree_stats(tree)
    print(f"  cache: {files} files, {size / 1024 / 1024:.1f} MB (with .git); first unpack {unpack_ms:.0f} ms")

    case = EvalCase(id=1, prompt="p", expected_output="e", files=("x",), assertions=("a" * 20,))
    enter, leave = [], []
    for _ in range(n_ws):
        t0 = time.perf_counter()
        cm = materialize_workspace(store, key, skill="demo", case=case, parent=parent, cache_dir=cache)
        ws = cm.__enter__()
        t1 = time.perf_counter()
        assert not (ws.path / "evals" / "demo.evals.json").exists()
        cm.__exit__(None, None, None)
        leave.append((time.perf_counter() - t1) * 1000)
        enter.append((t1 - t0) * 1000)

    with materialize_workspace(store, key, skill="demo", case=case, parent=parent, cache_dir=cache) as ws:
        t0 = time.perf_counter()
        box = open_sandbox(ws.path, SandboxMode.BWRAP)
        open_ms = (time.perf_counter() - t0) * 1000
        box.run("true")  # warm-up
        runs = []
        for _ in range(n_cmd):
            t0 = time.perf_counter()
            result = box.run("true")
            runs.append((time.perf_counter() - t0) * 1000)
            assert result.exit_code == 0, result

    ws_med, cmd_med = statistics.median(enter), statistics.median(runs)
    print(
        f"  workspace materialize: median {ws_med:.1f} ms over {len(enter)} "
        f"(p90 {statistics.quantiles(enter, n=10)[-1]:.1f} ms; removal median {statistics.median(leave):.1f} ms)"
        f"  target <= {TARGET_WORKSPACE_MS:.0f} ms: {_verdict(ws_med, TARGET_WORKSPACE_MS)}"
    )
    print(f"  open_sandbox (hands the tree to the sandbox uid when root): {open_ms:.1f} ms")
    print(
        f"  sandboxed `true`: median {cmd_med:.1f} ms over {len(runs)} "
        f"(p90 {statistics.quantiles(runs, n=10)[-1]:.1f} ms)"
        f"  target <= {TARGET_COMMAND_MS:.0f} ms: {_verdict(cmd_med, TARGET_COMMAND_MS)}"
    )
    return ws_med, cmd_med


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=30)
    parser.add_argument("--commands", type=int, default=50)
    parser.add_argument(
        "--dir",
        action="append",
        type=Path,
        help="where cache and workspaces live (repeatable); "
        "default: /dev/shm (tmpfs) when present, and the system temp folder",
    )
    args = parser.parse_args()
    locations = args.dir or [p for p in (Path("/dev/shm"), Path(tempfile.gettempdir())) if p.is_dir()]

    with tempfile.TemporaryDirectory(prefix="skill-eval-bench-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        build_repo(repo)
        files, size = tree_stats(repo)
        store = LocalStore(Path(tmp) / "store")
        started = time.perf_counter()
        key = snapshot_repo(repo, store)
        snap_ms = (time.perf_counter() - started) * 1000
        print(f"repo: {files} files, {size / 1024 / 1024:.1f} MB; snapshot {snap_ms:.0f} ms")
        for where in locations:
            with tempfile.TemporaryDirectory(prefix="skill-eval-bench-", dir=where) as loc:
                print(f"{where} ({_fs_type(where)}):")
                bench_location(store, key, Path(loc), args.workspaces, args.commands)
    return 0


def _verdict(median_ms: float, target_ms: float) -> str:
    return "OK" if median_ms <= target_ms else "MISSED"


def _fs_type(path: Path) -> str:
    best = ("?", "")
    with open("/proc/mounts") as mounts:
        for line in mounts:
            _dev, mnt, fstype, *_ = line.split()
            if str(path.resolve()).startswith(mnt) and len(mnt) > len(best[1]):
                best = (fstype, mnt)
    return best[0]


if __name__ == "__main__":
    raise SystemExit(main())
