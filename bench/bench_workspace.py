"""Benchmark: materializing a workspace from a cached snapshot, and one sandboxed ``true``.

Builds a git repo of about 1,000 files and 13 MB in a temp folder, snapshots it into a
local store, unpacks it once (the per-host cache), then measures

* materializing a workspace (copy + harden: corpus removed, remotes removed), median of N;
* one sandboxed ``true`` command in bubblewrap, median of M;
* with ``--commits C`` (default 3,000) the history scrub on a second repo of 2,000 files and C
  commits, the corpus changed every 50: the first workspace of a snapshot and skill pays the
  ``git filter-repo`` rewrite that removes the corpus from all of history (then cached), the
  following ones only the copy.

Targets: workspace <= 150 ms, sandboxed command <= 20 ms.

Run: ``.venv/bin/python bench/bench_workspace.py [--workspaces 30] [--commands 50] [--commits 3000]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
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


def build_history_repo(root: Path, files: int = 2000, commits: int = 3000) -> None:
    """A repo of ``files`` files and ``commits`` commits built with ``git fast-import``; every 50th
    commit changes the corpus, the others one source file each."""
    rng = random.Random(7)
    out: list[bytes] = []

    def blob(text: str) -> None:
        data = text.encode()
        out.append(b"data %d\n%s\n" % (len(data), data))

    for i in range(commits):
        stamp = 946_684_800 + i * 60
        out.append(b"commit refs/heads/main\n")
        out.append(b"author Dev%d <dev%d@example.invalid> %d +0000\n" % (i % 9, i % 9, stamp))
        out.append(b"committer Dev <dev@example.invalid> %d +0000\n" % stamp)
        blob(f"change {i}")
        if i == 0:
            for k in range(files):
                out.append(f"M 100644 inline src/pkg{k % 40:02d}/file{k:04d}.py\n".encode())
                blob("".join(f"line {rng.randrange(10**6)}\n" for _ in range(60)))
        if i % 50 == 0:
            out.append(b"M 100644 inline evals/demo.evals.json\n")
            blob(json.dumps({"skill_name": "demo", "evals": [{"assertion": f"corpus version {i}"}]}))
        else:
            out.append(f"M 100644 inline src/pkg{i % 40:02d}/file{rng.randrange(files):04d}.py\n".encode())
            blob("".join(f"line {rng.randrange(10**6)}\n" for _ in range(60)))
        out.append(b"\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input=b"".join(out), check=True)
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=root, check=True)
    subprocess.run(["git", "gc", "-q"], cwd=root, check=True)


def bench_history(tmp: Path, where: Path, commits: int, n_ws: int) -> tuple[float, float]:
    """(first workspace ms including the history scrub, median later workspace ms) for a big-history repo."""
    repo = tmp / "history-repo"
    build_history_repo(repo, commits=commits)
    store = LocalStore(tmp / "history-store")
    key = snapshot_repo(repo, store)
    files, size = tree_stats(repo)
    print(f"history repo: {files} files, {size / 1024 / 1024:.1f} MB (with .git), {commits} commits")
    cache, parent = where / "hcache", where / "hws"
    unpack_snapshot(store, key, cache)
    case = EvalCase(id=1, prompt="p", expected_output="e", files=("x",), assertions=("a" * 20,))
    times = []
    for _ in range(n_ws + 1):
        t0 = time.perf_counter()
        with materialize_workspace(store, key, skill="demo", case=case, parent=parent, cache_dir=cache) as ws:
            times.append((time.perf_counter() - t0) * 1000)
            assert len(times) > 1 or _no_corpus_in_history(ws.path)
    first, later = times[0], statistics.median(times[1:])
    print(
        f"  first workspace (scrub {commits} commits with git filter-repo, cached after): {first:.0f} ms; "
        f"later workspaces: median {later:.1f} ms over {n_ws}"
    )
    return first, later


def _no_corpus_in_history(root: Path) -> bool:
    log = subprocess.run(
        ["git", "log", "--all", "--format=%H", "--", "evals/demo.evals.json"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return log.stdout == ""


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
    parser.add_argument("--commits", type=int, default=3000, help="commits of the history-scrub repo (0: skip)")
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
                if args.commits:
                    bench_history(Path(tmp), Path(loc), args.commits, min(args.workspaces, 10))
                    shutil.rmtree(Path(tmp) / "history-repo")
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
