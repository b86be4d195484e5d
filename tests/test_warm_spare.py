"""The warm spare: a worker process one run leaves imported for the next run to take.

Real commands (``python -m producer``, the entry point) against the offline model server; the
spare is a real detached process on a real unix socket. Each test has its own short
``XDG_RUNTIME_DIR`` (a socket path holds ~100 bytes) and kills whatever spare it left.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.node import WorkerNode
from engine.settings import Settings
from producer.launch import warm
from schemas.constants import ALL_QUEUES
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, alive, descendants, new_repo, scenario, write_skill
from tests.e2e_support import case as e2e_case
from tests.engine_support import worker_env


@pytest.fixture
def runtime() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="se-", dir="/tmp"))
    folder.chmod(0o700)
    yield folder
    for pid in _spares(folder):
        os.kill(pid, signal.SIGKILL)
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def _spares(runtime: Path) -> list[int]:
    """Pids of live spare processes whose socket is under ``runtime``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--spare" in cmd and any(str(runtime).encode() in part for part in cmd) and alive([int(entry.name)]):
                found.append(int(entry.name))
    return found


def _wait_for(check, timeout_s: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if got := check():
            return got
        time.sleep(0.05)
    return check()


def _listening_spare(runtime: Path) -> int:
    """The pid of the one spare listening under ``runtime``, once it listens (it is imported)."""
    (pid,) = _wait_for(lambda: _spares(runtime) if _socket_of(runtime) else [])
    return int(pid)


def _socket_of(runtime: Path) -> list[Path]:
    folder = runtime / "skill-eval"
    return sorted(folder.glob("*.sock")) if folder.is_dir() else []


def _leave_and_claim(environ: dict[str, str]) -> None:
    """Leave a spare, claim that very process once it listens, then kill it."""
    spare = warm.leave(environ)
    assert spare is not None
    claimed = _wait_for(lambda: warm.claim(environ))
    assert claimed is not None and claimed.pid == spare.pid
    claimed.kill()
    assert spare.wait(15) != 0


def _env(tmp_path: Path, server: OfflineModelServer, runtime: Path, **extra: str) -> Env:
    env = Env(
        tmp_path / "e2e",
        server.base_url,
        extra={"SKILL_EVAL_WARM": "1", "XDG_RUNTIME_DIR": str(runtime), "SKILL_EVAL_WARM_IDLE_S": "120", **extra},
    )
    env.base.mkdir(exist_ok=True)
    return env


def _repo(tmp_path: Path) -> Path:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", [e2e_case(i, f"Say hello {i}.", ["The agent runs echo hello"]) for i in (1, 2)])
    return repo


def _run_watching(env: Env, *args: str) -> tuple[object, set[str]]:
    """Run to its end; its result and the command lines of the worker processes it started for
    itself (not the spare it leaves on its way out)."""
    proc = env.start(*args)
    workers: set[str] = set()
    while proc.poll() is None:
        found = descendants(proc.pid).values()
        workers |= {c for c in found if ("worker.prestart" in c or "-m worker.boot" in c) and "--spare" not in c}
        time.sleep(0.05)
    return env.finish(proc, args), workers


SLOW = [{"name": "slow", "tools": True, "replies": [{"text": "hello", "delay_s": 0.5}]}]


def test_a_run_leaves_a_spare_and_the_next_run_becomes_it(tmp_path: Path, runtime: Path) -> None:
    repo = _repo(tmp_path)
    with OfflineModelServer(scenario(SLOW, [])) as server:
        env = _env(tmp_path, server, runtime)
        first, started = _run_watching(env, *env.run_args(repo, "greet"))
        assert first.code in (0, 1), first.stderr[-2000:]  # type: ignore[attr-defined]
        assert started, "no spare to take yet: the first run starts its own worker"
        spare = _listening_spare(runtime)
        assert oct((runtime / "skill-eval").stat().st_mode & 0o777) == "0o700"

        second, started = _run_watching(env, *env.run_args(repo, "greet"))
        assert second.code in (0, 1), second.stderr[-2000:]  # type: ignore[attr-defined]
        assert "not graded (infra): none" in second.stdout, second.stdout[-2000:]  # type: ignore[attr-defined]
        assert started == set(), started  # no worker of its own: the spare ran its shards
        assert _wait_for(lambda: not alive([spare]), timeout_s=10)  # served one run, stopped with it
        after = _listening_spare(runtime)
        assert after != spare  # the second run left a fresh one


def test_a_spare_is_not_taken_by_a_command_with_another_environment(tmp_path: Path, runtime: Path) -> None:
    repo = _repo(tmp_path)
    with OfflineModelServer(scenario(SLOW, [])) as server:
        env = _env(tmp_path, server, runtime)
        assert env.run(repo, "greet").code in (0, 1)
        spare = _listening_spare(runtime)

        other = _env(tmp_path, server, runtime, SOME_PROVIDER_SETTING="changed")
        done, started = _run_watching(other, *other.run_args(repo, "greet"))
        assert done.code in (0, 1), done.stderr[-2000:]  # type: ignore[attr-defined]
        assert started, "it must start its own worker"
        assert alive([spare])  # still waiting for a command like the one that left it
        assert len(_wait_for(lambda: len(_socket_of(runtime)) == 2 and _socket_of(runtime))) == 2


def test_a_killed_command_takes_its_claimed_spare_with_it(tmp_path: Path, runtime: Path) -> None:
    repo = _repo(tmp_path)
    with OfflineModelServer(scenario(SLOW, [])) as server:
        env = _env(tmp_path, server, runtime)
        assert env.run(repo, "greet").code in (0, 1)
        spare = _listening_spare(runtime)

        # Killed before its cluster opened: the claimed spare reads end-of-file instead of an order.
        proc = env.start(*env.run_args(repo, "greet"))
        assert _wait_for(lambda: not _socket_of(runtime), timeout_s=30)  # claimed: it stops listening
        proc.kill()
        proc.communicate()
        assert _wait_for(lambda: not alive([spare]), timeout_s=15)

        # Killed while the spare runs its shards as the worker: the hang-up ends it.
        assert env.run(repo, "greet").code in (0, 1)  # leaves the next spare
        spare = _listening_spare(runtime)
        server.reset()
        proc = env.start(*env.run_args(repo, "greet"))
        assert _wait_for(lambda: server.stats()["total"] > 0, timeout_s=60)  # it has its order and runs
        proc.kill()
        proc.communicate()
        assert _wait_for(lambda: not alive([spare]), timeout_s=15)


def test_an_idle_spare_removes_its_socket_and_exits(runtime: Path) -> None:
    environ = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SKILL_EVAL_WARM_IDLE_S": "1"}
    spare = warm.leave(environ)
    assert spare is not None
    assert _wait_for(lambda: _socket_of(runtime))
    assert spare.wait(30) == 0
    assert _socket_of(runtime) == []


def test_leaving_a_spare_retires_the_oldest_of_other_keys_beyond_two(runtime: Path) -> None:
    def environ(tag: str) -> dict[str, str]:
        return {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SKILL_EVAL_WARM_IDLE_S": "60", "TAG": tag}

    oldest = warm.leave(environ("a"))
    assert oldest is not None
    assert _wait_for(lambda: len(_socket_of(runtime)) == 1)
    newer = warm.leave(environ("b"))
    assert newer is not None
    assert _wait_for(lambda: len(_socket_of(runtime)) == 2)
    newest = warm.leave(environ("c"))  # a third key: the oldest other one makes room
    assert newest is not None
    assert oldest.wait(15) == 0
    assert _wait_for(lambda: len(_socket_of(runtime)) == 2)
    assert newer.poll() is None and newest.poll() is None
    claimed = warm.claim(environ("b"))  # still there to be taken
    assert claimed is not None and claimed.pid == newer.pid
    for spare in (newer, newest):
        spare.kill()
        spare.wait()


@pytest.mark.parametrize("kind", ["open to others", "a symlink", "another user's"])
def test_a_spare_folder_that_is_not_private_is_never_used(tmp_path: Path, runtime: Path, kind: str) -> None:
    folder = runtime / "skill-eval"
    if kind == "open to others":
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)
    elif kind == "a symlink":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "elsewhere")
    else:
        folder.mkdir(mode=0o700)
        os.chown(folder, 65534, 65534)
    environ = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    assert not warm.private_dir(folder, create=True)
    assert warm.leave(environ) is None and warm.claim(environ) is None
    assert not list(folder.glob("*.sock"))


def _listen_as(path: Path, answer: bytes | None) -> threading.Thread:
    """A process of this user at a spare's socket that is not a spare: it answers ``answer`` (or nothing)."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(100)
        if answer is not None:
            conn.sendall(answer)
        time.sleep(warm.CLAIM_TIMEOUT_S + 1)
        conn.close()
        listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("answer", [None, b'{"pid": 1}\n', b"not json\n", b"[]\n"])
def test_something_else_at_the_spare_socket_is_not_claimed(runtime: Path, answer: bytes | None) -> None:
    environ = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    path = warm.socket_path(environ, warm.spare_key(environ))
    assert path is not None
    _listen_as(path, answer)
    started = time.monotonic()
    assert warm.claim(environ) is None
    assert time.monotonic() - started < warm.CLAIM_TIMEOUT_S + 1


def test_a_dead_spares_socket_file_is_replaced_by_the_next_spare(runtime: Path) -> None:
    environ = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SKILL_EVAL_WARM_IDLE_S": "30"}
    path = warm.socket_path(environ, warm.spare_key(environ))
    assert path is not None
    path.parent.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens
    assert warm.claim(environ) is None
    _leave_and_claim(environ)


@pytest.mark.parametrize(
    ("value", "interactive", "expected"),
    [
        ("", True, True),
        ("", False, False),
        ("1", False, True),
        ("on", False, True),
        ("0", True, False),
        ("off", True, False),
        ("maybe", True, False),  # refused by the command's settings: no spare is left for it
    ],
)
def test_the_spare_is_on_for_a_terminal_unless_the_environment_says(
    value: str, interactive: bool, expected: bool
) -> None:
    assert warm.enabled({"SKILL_EVAL_WARM": value} if value else {}, interactive) is expected


def test_a_bad_idle_time_leaves_no_spare() -> None:
    assert warm.enabled({"SKILL_EVAL_WARM": "1", "SKILL_EVAL_WARM_IDLE_S": "abc"}, True) is False
    assert warm.enabled({"SKILL_EVAL_WARM": "1", "SKILL_EVAL_WARM_IDLE_S": "30"}, False) is True


def test_the_key_follows_the_code_and_the_environment_but_not_the_shell_s_own_variables(tmp_path: Path) -> None:
    base = {"HOME": "/h", "OPENAI_API_KEY": "k1", "PWD": "/a", "OLDPWD": "/b", "SHLVL": "1"}
    key = warm.spare_key(base)
    assert warm.spare_key({**base, "PWD": "/c", "OLDPWD": "/a", "SHLVL": "2", "_": "/usr/bin/x"}) == key
    assert warm.spare_key({**base, "OPENAI_API_KEY": "k2"}) != key
    assert warm.spare_key({k: v for k, v in base.items() if k != "HOME"}) != key
    # A source file touched changes it (a spare never runs code older than the command's).
    code = Path(warm.__file__)
    before = code.stat()
    try:
        os.utime(code, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        assert warm.spare_key(base) != key
    finally:
        os.utime(code, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert warm.spare_key(base) == key


def test_the_spare_becomes_the_worker_its_order_describes(tmp_path: Path, runtime: Path, settings: Settings) -> None:
    """The order a spare receives is the one a spawned process would: node, env, folder, log."""
    environ = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SKILL_EVAL_WARM_IDLE_S": "30"}
    spare = warm.leave(environ)
    assert spare is not None
    claimed = _wait_for(lambda: warm.claim(environ))
    assert claimed is not None
    log = tmp_path / "worker.log"
    node = WorkerNode(ALL_QUEUES, 2, "from-spare@localhost", loglevel="INFO")
    order = {"node": node.to_json(), "env": worker_env(settings), "log": str(log), "cwd": str(tmp_path)}
    assert claimed.send_order(order)
    assert _wait_for(lambda: log.exists() and "from-spare@localhost ready." in log.read_text(errors="replace"))
    assert claimed.poll() is None
    os.killpg(claimed.pid, signal.SIGTERM)  # the node's warm shutdown, as the cluster stops it
    assert claimed.wait(30) == -1 and spare.wait(30) == 0


def test_a_spare_that_stops_answering_is_stopped_and_the_next_one_takes_its_place(runtime: Path) -> None:
    """A wedged spare would cost every later command the claim's wait, and its lock would keep a
    new spare for the key from starting: the first claim that times out on it kills it."""
    environ = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SKILL_EVAL_WARM_IDLE_S": "60"}
    wedged = warm.leave(environ)
    assert wedged is not None
    assert _listening_spare(runtime) == wedged.pid
    os.kill(wedged.pid, signal.SIGSTOP)
    started = time.monotonic()
    assert warm.claim(environ) is None
    assert time.monotonic() - started < warm.CLAIM_TIMEOUT_S + 1
    assert wedged.wait(10) == -signal.SIGKILL
    _leave_and_claim(environ)


def test_a_spare_whose_imports_fail_exits_without_listening(tmp_path: Path, runtime: Path) -> None:
    """A command must never be handed a worker that cannot import its model client."""
    broken = tmp_path / "site" / "litellm"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('a half-upgraded install')\n")
    environ = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "PYTHONPATH": str(tmp_path / "site")}
    spare = warm.leave(environ)
    assert spare is not None
    assert spare.wait(120) == 1
    assert _socket_of(runtime) == []
    assert warm.claim(environ) is None


def test_a_spare_imports_celery_s_boot_but_not_the_app_whose_broker_its_orders_bring() -> None:
    """A spare imports before it has its orders' environment: Celery's own boot modules are safe to
    load then, the app (which reads its broker from that environment) and the tasks are not."""
    code = (
        "import sys; from worker.warmup import CELERY_BOOT_MODULES, import_heavy_modules;"
        " import_heavy_modules();"
        " print(all(m in sys.modules for m in CELERY_BOOT_MODULES),"
        " [m for m in ('worker.app', 'worker.tasks') if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", code], cwd="/", capture_output=True, text=True, timeout=180, check=True
    )
    assert done.stdout.split() == ["True", "[]"], done.stdout + done.stderr


def test_imports_frozen_pauses_the_collector_and_freezes_only_what_a_finished_block_built() -> None:
    code = (
        "import gc; from engine.heap import imports_frozen\n"
        "before = gc.get_freeze_count()\n"
        "try:\n"
        "    with imports_frozen():\n"
        "        assert not gc.isenabled()\n"
        "        raise KeyError\n"
        "except KeyError:\n"
        "    pass\n"
        "failed = gc.get_freeze_count()\n"
        "with imports_frozen():\n"
        "    kept = [[i] for i in range(10000)]\n"
        "print(gc.isenabled(), failed == before, gc.get_freeze_count() - failed >= 10000)\n"
    )
    done = subprocess.run([sys.executable, "-P", "-c", code], cwd="/", capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "True", "True"], done.stdout + done.stderr


def test_a_spare_left_by_a_run_whose_models_went_direct_waits_without_litellm(runtime: Path) -> None:
    """About 150 MB less while it waits; the order of a run that may need litellm brings it back."""
    environ = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SKILL_EVAL_WARM_IDLE_S": "30"}
    lean = warm.leave(environ, lean=True)
    assert lean is not None
    try:
        # Right after the spawn the child may not have exec'd yet (its environ reads empty then).
        deadline = time.monotonic() + 10
        while (
            not (environ_now := (Path("/proc") / str(lean.pid) / "environ").read_bytes())
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert b"SKILL_EVAL_PRELOAD_LITELLM=0" in environ_now.split(b"\0")
    finally:
        lean.kill()
        lean.wait(10)


def test_a_process_whose_warm_up_left_litellm_out_imports_it_once_its_orders_want_it() -> None:
    script = (
        "import os, sys\n"
        "os.environ['SKILL_EVAL_PRELOAD_LITELLM'] = '0'\n"
        "from worker.warmup import import_litellm_if_wanted, start_warmup\n"
        "start_warmup().join()\n"
        "print('litellm' in sys.modules, import_litellm_if_wanted())\n"
        "del os.environ['SKILL_EVAL_PRELOAD_LITELLM']  # the order of a run that may need it\n"
        "import_litellm_if_wanted().join()\n"
        "print('litellm' in sys.modules, import_litellm_if_wanted())\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "None", "True", "None"]
