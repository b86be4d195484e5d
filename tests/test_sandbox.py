"""Every executor tool call runs in a sandbox it cannot leave: real commands in real bwrap, host checked after."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.errors import NoSandbox
from schemas.status import SandboxMode
from worker import sandbox as sandbox_mod
from worker.output import OutputBuffer
from worker.sandbox import BwrapSandbox, CommandResult, SandboxLimits, open_sandbox, require_sandbox
from worker.sandbox_exec import bwrap_argv, execute, inner_argv, sandbox_env

# No skip when bubblewrap is missing: `make test` installs it, and a missing sandbox must fail loudly.
QUICK = SandboxLimits(timeout_s=10, processes=64)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "parent" / "ws"
    ws.mkdir(parents=True)
    (ws / "README.md").write_text("hello\n")
    return ws


@pytest.fixture
def sandbox(workspace: Path) -> BwrapSandbox:
    box = open_sandbox(workspace, SandboxMode.BWRAP, QUICK)
    assert isinstance(box, BwrapSandbox)
    return box


def _marker() -> str:
    return f"pwned-{uuid.uuid4().hex}"


def _uid_processes(uid: int, settle_s: float = 5.0) -> list[int]:
    """Processes of ``uid`` still on the host once a killed PID namespace had ``settle_s`` to drain.

    bwrap reports the exit status before the kernel has finished tearing the namespace down,
    so SIGKILLed processes may take a moment to disappear.
    """
    deadline = time.monotonic() + settle_s
    while (pids := _scan_uid(uid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def _scan_uid(uid: int) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


# --- the workspace is the only writable host path -------------------------------------------


def test_a_command_runs_in_the_workspace_and_its_writes_land_there(sandbox: BwrapSandbox) -> None:
    result = sandbox.run("pwd; cat README.md; echo made > new.txt")
    assert result.exit_code == 0 and result.limit is None
    assert result.output.splitlines() == ["/workspace", "hello"]
    assert (sandbox.workspace / "new.txt").read_text() == "made\n"


def test_writing_the_live_repo_by_absolute_path_does_not_reach_the_host(
    sandbox: BwrapSandbox, example_repo: Path
) -> None:
    name = _marker()
    result = sandbox.run(f"echo x > {example_repo}/{name}; echo x > {example_repo}/README.md")
    assert result.exit_code != 0
    assert not (example_repo / name).exists()
    assert (example_repo / "README.md").read_text() != "x\n"


def test_writing_the_parent_folder_does_not_reach_the_host(sandbox: BwrapSandbox) -> None:
    name = _marker()
    parent = sandbox.workspace.parent
    sandbox.run(f"echo x > ../{name}; echo x > {parent}/{name}; mkdir -p {parent}/{name}.d")
    assert sorted(p.name for p in parent.iterdir()) == ["ws"]


def test_writing_home_does_not_reach_the_real_home(sandbox: BwrapSandbox) -> None:
    name = _marker()
    result = sandbox.run(f'echo x > "$HOME/{name}" && cat "$HOME/{name}"; echo x > {Path.home()}/{name}')
    assert result.output.startswith("x\n")  # the private HOME is writable...
    assert not (Path.home() / name).exists()  # ...and is not the real one


def test_writing_tmp_does_not_reach_the_host_tmp(sandbox: BwrapSandbox) -> None:
    name = _marker()
    result = sandbox.run(f"echo x > /tmp/{name} && ls /tmp")
    assert result.output.strip() == name
    assert not Path("/tmp", name).exists()


def test_writing_through_a_symlink_pointing_outside_does_not_reach_the_host(
    sandbox: BwrapSandbox, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (sandbox.workspace / "escape").symlink_to(outside)
    (sandbox.workspace / "escape-file").symlink_to(outside / "target.txt")
    sandbox.run(f"echo x > escape/pwned; echo x > escape-file; ln -s {outside} made-inside; echo x > made-inside/y")
    assert list(outside.iterdir()) == []


def test_the_system_is_read_only(sandbox: BwrapSandbox) -> None:
    result = sandbox.run("touch /usr/pwned /etc/pwned /pwned 2>&1; echo done")
    assert result.output.count("Read-only file system") + result.output.count("Permission denied") == 3
    assert not Path("/usr/pwned").exists() and not Path("/etc/pwned").exists()


# --- no network, no secrets -------------------------------------------------------------------


@pytest.fixture
def loopback_server() -> Iterator[tuple[int, list[bytes]]]:
    received: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                received.append(conn.recv(1024) or b"<connected>")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    stop.set()
    thread.join()
    server.close()


def test_a_server_on_the_hosts_loopback_is_unreachable(
    sandbox: BwrapSandbox, loopback_server: tuple[int, list[bytes]]
) -> None:
    port, received = loopback_server
    # Control: the server does answer the host.
    with socket.create_connection(("127.0.0.1", port)) as probe:
        probe.sendall(b"host")
    result = sandbox.run(f"echo sandbox > /dev/tcp/127.0.0.1/{port} && echo CONNECTED")
    assert "CONNECTED" not in result.output
    assert "Connection refused" in result.output
    sandbox_mod_net = sandbox.run("ls /sys/class/net 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1")
    assert sandbox_mod_net.output.split() == ["lo"]
    assert b"sandbox" not in received


def test_the_workers_api_keys_never_reach_the_sandbox(sandbox: BwrapSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    result = sandbox.run("env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; ps -ef")
    assert secret not in result.output
    assert "OPENAI_API_KEY" not in result.output
    assert "HOME=/home/agent" in result.output


# --- limits end the command, never the case -------------------------------------------------


def test_a_fork_bomb_is_contained_and_reported_as_the_process_limit(workspace: Path) -> None:
    box = open_sandbox(workspace, SandboxMode.BWRAP, SandboxLimits(timeout_s=2, processes=32))
    assert isinstance(box, BwrapSandbox) and box.uid is not None
    result = box.run("bomb() { bomb | bomb & }; bomb; sleep 0.5")
    assert result.limit == "processes"
    # The very next command may fork again: the bomb's dying processes no longer count.
    after = box.run("for i in 1 2 3 4 5 6 7 8; do true & done; wait; echo still usable")
    assert (after.output, after.limit) == ("still usable\n", None)
    assert _uid_processes(box.uid, settle_s=0) == []  # nothing of the sandbox survives on the host


def test_an_endless_loop_is_killed_at_the_wall_clock_with_its_background_children(
    sandbox: BwrapSandbox,
) -> None:
    assert sandbox.uid is not None
    result = sandbox.run("sleep 300 & echo started; while :; do :; done", timeout_s=1)
    assert (result.limit, result.exit_code) == ("timeout", None)
    assert result.output == "started\n"
    assert 1 <= result.duration_s < 5
    assert _uid_processes(sandbox.uid) == []


def test_the_wall_clock_is_extended_by_what_the_command_waited_on_the_fleet(tmp_path: Path) -> None:
    # A harness's model proxy reports what its requests waited in the limiter; that time is not
    # the agent's, so the command's wall clock moves out by it while it runs.
    waited = [0.0]

    def run(allowance: object) -> CommandResult:
        return execute(
            ["sh", "-c", "sleep 1.5; echo done"],
            env={"PATH": "/usr/bin:/bin"},
            cwd=tmp_path,
            stdin=None,
            timeout_s=1.0,
            limits=SandboxLimits(),
            allowance=allowance,  # type: ignore[arg-type]
        )

    assert run(None).limit == "timeout"
    timer = threading.Timer(0.5, lambda: waited.__setitem__(0, 1.0))  # the proxy waited 1 s meanwhile
    timer.start()
    result = run(lambda: waited[0])
    timer.join()
    assert (result.output, result.exit_code, result.limit) == ("done\n", 0, None)


def test_cpu_time_is_limited_apart_from_the_wall_clock(workspace: Path) -> None:
    box = open_sandbox(workspace, SandboxMode.BWRAP, SandboxLimits(timeout_s=20, cpu_s=1))
    result = box.run("while :; do :; done")
    assert (result.limit, result.exit_code) == ("cpu", None)
    assert result.duration_s < 10


def test_memory_is_limited(workspace: Path) -> None:
    box = open_sandbox(workspace, SandboxMode.BWRAP, SandboxLimits(timeout_s=20, memory_mb=256))
    result = box.run("python3 -c 'x = bytearray(512 * 1024 * 1024)'")
    assert result.limit == "memory"
    assert box.run("python3 -c 'x = bytearray(64 * 1024 * 1024); print(len(x))'").output == "67108864\n"


def test_file_size_is_limited(workspace: Path) -> None:
    box = open_sandbox(workspace, SandboxMode.BWRAP, SandboxLimits(timeout_s=20, file_size_mb=1))
    result = box.run("head -c 5000000 /dev/zero > big.bin")
    assert result.limit == "file-size"
    assert (workspace / "big.bin").stat().st_size <= 1024 * 1024


def test_100_mb_of_output_keeps_head_and_tail_with_an_exact_elision_count(sandbox: BwrapSandbox) -> None:
    result = sandbox.run("echo HEAD; head -c 100000000 /dev/zero | tr '\\0' a; echo; echo TAIL", timeout_s=60)
    assert result.exit_code == 0 and result.truncated
    assert result.output.startswith("HEAD\n") and result.output.endswith("TAIL\n")
    kept = QUICK.output_chars
    total = len("HEAD\n") + 100_000_000 + len("\nTAIL\n")
    assert f"... [{total - kept} chars elided] ..." in result.output
    assert len(result.output) < kept + 100


def test_stdin_is_fed_to_the_command(sandbox: BwrapSandbox) -> None:
    assert sandbox.run("tr a-z A-Z", stdin="quiet\n").output == "QUIET\n"


def test_a_command_that_cannot_start_is_a_result_not_an_exception(sandbox: BwrapSandbox) -> None:
    result = sandbox.run("echo \x00")
    assert result.exit_code is None and "could not start" in result.output


# --- git inside the sandbox -----------------------------------------------------------------


def test_git_works_inside_but_push_to_a_removed_remote_reaches_nothing(tmp_path: Path) -> None:
    from engine.snapshot import snapshot_repo
    from engine.store import LocalStore
    from schemas.corpus import EvalCase
    from worker.workspace import materialize_workspace

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "i"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True)
    subprocess.run(["git", "remote", "add", "origin", str(remote)], cwd=repo, check=True)
    store = LocalStore(tmp_path / "store")
    key = snapshot_repo(repo, store)
    case = EvalCase(id=1, prompt="p", expected_output="e", files=("a.txt",), assertions=("x" * 20,))
    with materialize_workspace(
        store, key, skill="demo", case=case, parent=tmp_path / "ws", cache_dir=tmp_path / "cache"
    ) as ws:
        box = open_sandbox(ws.path, SandboxMode.BWRAP, QUICK)
        result = box.run(
            "echo b >> a.txt && git commit -qam change && git log --oneline | wc -l; "
            f"git push origin HEAD:main; git push {remote} HEAD:main; git remote"
        )
    assert result.output.splitlines()[0] == "2"  # committing inside works
    assert "'origin' does not appear to be a git repository" in result.output
    assert "does not appear to be a git repository" in result.output.split("\n", 2)[2]
    heads = subprocess.run(["git", "for-each-ref"], cwd=remote, capture_output=True, text=True).stdout
    assert heads == ""


# --- refusing to run without a sandbox -------------------------------------------------------


def _path_with(tmp_path: Path, tools: dict[str, str | None]) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, script in tools.items():
        if script is None:
            (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
        else:
            (bin_dir / tool).write_text(script)
            (bin_dir / tool).chmod(0o755)
    return str(bin_dir)


def test_a_missing_bwrap_is_refused_naming_the_debian_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _path_with(tmp_path, {"prlimit": None, "setpriv": None}))
    with pytest.raises(NoSandbox, match="bubblewrap") as info:
        require_sandbox(SandboxMode.BWRAP)
    assert "--sandbox none" in str(info.value)
    require_sandbox(SandboxMode.NONE)  # the explicit opt-out still works


def test_a_bwrap_that_cannot_create_namespaces_is_refused_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    monkeypatch.setenv("PATH", _path_with(tmp_path, {"prlimit": None, "setpriv": None, "bwrap": broken}))
    sandbox_mod._probe_bwrap.cache_clear()
    try:
        with pytest.raises(NoSandbox, match="No permissions to creating new namespace"):
            require_sandbox(SandboxMode.BWRAP)
    finally:
        sandbox_mod._probe_bwrap.cache_clear()


def test_missing_util_linux_helpers_are_refused_in_every_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _path_with(tmp_path, {}))
    with pytest.raises(NoSandbox, match="util-linux"):
        require_sandbox(SandboxMode.NONE)


# --- the explicit unconfined mode keeps limits and scrubbing ----------------------------------


def test_sandbox_none_keeps_the_limits_and_the_scrubbed_environment(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    box = open_sandbox(workspace, SandboxMode.NONE, SandboxLimits(timeout_s=2, processes=32))
    assert box.mode is SandboxMode.NONE and box.inner_root == str(workspace.resolve())
    env = box.run("env; pwd")
    assert secret not in env.output and env.output.rstrip().endswith(str(workspace.resolve()))
    assert box.run("bomb() { bomb | bomb & }; bomb; sleep 0.5").limit == "processes"
    assert box.run("sleep 300 & while :; do :; done", timeout_s=1).limit == "timeout"
    uid = getattr(box, "uid", None)
    if uid is not None:
        assert _uid_processes(uid) == []
    box.close()  # type: ignore[attr-defined]


# --- output capture, unit level ---------------------------------------------------------------


def test_short_output_is_kept_whole() -> None:
    buf = OutputBuffer(100)
    buf.feed(b"hello ")
    buf.feed("w\u00f6rld".encode()[:3])  # a multi-byte character split across reads
    buf.feed("w\u00f6rld".encode()[3:])
    assert buf.render() == ("hello w\u00f6rld", False)


def test_long_output_keeps_exactly_head_and_tail() -> None:
    buf = OutputBuffer(10)
    full = "".join(f"{i:04d}" for i in range(1000))
    for i in range(1000):
        buf.feed(f"{i:04d}".encode())
    assert buf.render() == (full[:5] + f"\n... [{len(full) - 10} chars elided] ...\n" + full[-5:], True)


# --- a worker that is not root (a developer's laptop) ---------------------------------------


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder an unprivileged uid can reach (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="skill-eval-nonroot-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to impersonate an unprivileged worker")
def test_an_unprivileged_worker_counts_processes_per_sandbox_not_per_user(shared_dir: Path) -> None:
    """Without root, bwrap uses a user namespace and the rlimits are set inside it, so the
    user's other processes do not eat the sandbox's allowance, and a fork bomb is still held."""
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    limits = SandboxLimits(timeout_s=2, processes=16)
    env = sandbox_env(home="/home/agent", tmp="/tmp")

    def run(command: str) -> CommandResult:
        argv = bwrap_argv(shared_dir, limits, uid=None, inner=inner_argv(command, limits, uid=None), env=env)
        return execute(as_nobody + argv, env=env, cwd=None, stdin=None, timeout_s=2, limits=limits)

    sleepers = [subprocess.Popen([*as_nobody, "sleep", "30"]) for _ in range(24)]  # more than the limit
    try:
        result = run("for i in 1 2 3 4 5; do sleep 0.2 & done; wait; id -u; echo ok > f")
        assert result.output == "65534\n" and result.limit is None
        assert (shared_dir / "f").read_text() == "ok\n"
        assert run("bomb() { bomb | bomb & }; bomb; sleep 0.5").limit == "processes"
        deadline = time.monotonic() + 5
        while len(_scan_uid(65534)) > len(sleepers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_scan_uid(65534)) == len(sleepers)  # only the host's own are left
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()
