"""Attack 1: a repo's own git configuration tries to run commands on the worker host.

The crafted repo's ``.git/config`` defines a clean filter, a textconv, an fsmonitor, an
include and a hooks path; ``.gitattributes`` and ``.git/info/attributes`` select the filter
for every file; ``.git/hooks`` holds hooks. A case with a base-stage fixture makes the worker
commit on the host. Each command would write (with the worker's environment) to a file
outside the repo. The run must grade normally and no such file may appear.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import redis

from engine.redis_server import RedisServer
from testkit.offline_server import OfflineModelServer
from tests.security.harness import case, git, make_repo, run_pipeline, shell_agent

pytestmark = pytest.mark.slow
SKILL = "safe-commit"


def _hostile_config(repo: Path, pwned: Path) -> None:
    cmd = f'"env > {pwned}/ran-$$; cat"'  # quoted: a bare ; starts a comment in git config
    (pwned / "include.cfg").write_text(f'[filter "inc"]\n\tclean = {cmd}\n')
    with open(repo / ".git" / "config", "a") as f:
        f.write(
            f'[filter "pwn"]\n\tclean = {cmd}\n\tsmudge = {cmd}\n'
            f'[diff "pwn"]\n\ttextconv = {cmd}\n\tcommand = {cmd}\n'
            f"[core]\n\tfsmonitor = {cmd}\n\thooksPath = .git/hooks\n\tpager = {cmd}\n"
            f"[include]\n\tpath = {pwned}/include.cfg\n"
        )
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=pwn diff=pwn\n")
    for hook in ("pre-commit", "post-commit", "commit-msg", "post-checkout", "reference-transaction"):
        path = repo / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\nenv > {pwned}/hook-{hook}\n")
        path.chmod(0o755)


def test_repo_git_config_never_runs_a_command_on_the_host(
    tmp_path: Path, server: OfflineModelServer, redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    pwned = tmp_path / "pwned"
    pwned.mkdir()
    fixture = {"path": "src/app.py", "content": "print('base')\n", "stage": "base"}
    head = {"path": "src/app.py", "content": "print('head')\n"}
    repo = make_repo(
        tmp_path / "repo",
        SKILL,
        [
            case(1, "CASE-ONE show the diff", ["runs git diff to see the change"], fixtures=[fixture, head]),
            case(2, "CASE-TWO show the log", ["runs git log to see the history"]),
        ],
    )
    (repo / ".gitattributes").write_text("* filter=pwn diff=pwn\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attributes")
    _hostile_config(repo, pwned)
    server.set_scenario(
        {
            "rules": [
                shell_agent("CASE-ONE", ["git diff", "git status --short", "git log --format=%s"]),
                shell_agent("CASE-TWO", ["git log --oneline", "git show --stat HEAD"]),
            ],
            "judge": [
                {"assertion_contains": "git diff", "transcript_regex": r"\[tool_call\] shell\(.*git diff"},
                {"assertion_contains": "git log", "transcript_regex": r"\[tool_call\] shell\(.*git log"},
            ],
        }
    )
    os.environ["SKILL_EVAL_CANARY_KEY"] = "sk-canary-must-not-leak"
    try:
        run = run_pipeline(repo, SKILL, server=server, redis_url=redis_server.url, work=tmp_path / "work")
    finally:
        del os.environ["SKILL_EVAL_CANARY_KEY"]

    assert sorted(p.name for p in pwned.iterdir()) == ["include.cfg"], "a repo-chosen command ran on the host"
    assert {o["state"] for o in run.outcomes.values()} == {"graded"}, run.outcomes
    assert run.result.verdict.value == "PASS", run.report
    # The base fixture really was committed on the host (the attack's trigger happened).
    first = next(t for t in run.trajectories.values() if t.case_id == 1)
    log = next(e for e in first.events if getattr(e, "output", "").startswith("eval-fixture"))
    assert "eval-fixture: base state" in log.output  # type: ignore[union-attr]
    assert "sk-canary" not in run.transcript_sent_to_judges() + run.report


def test_host_diffs_never_run_an_external_diff_or_a_textconv(tmp_path: Path) -> None:
    """Belt and braces for a repo whose config was *not* rewritten (the developer's own)."""
    from engine.gitcmd import run_git

    pwned = tmp_path / "pwned"
    pwned.mkdir()
    repo = make_repo(tmp_path / "repo", SKILL, [case(1, "p", ["runs git diff first"])])
    (repo / ".gitattributes").write_text("*.md diff=pwn\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "attrs")
    with open(repo / ".git" / "config", "a") as f:
        f.write(f'[diff]\n\texternal = "touch {pwned}/ext"\n[diff "pwn"]\n\ttextconv = "touch {pwned}/tc; cat"\n')
    (repo / "README.md").write_text("changed\n")
    for args in (["diff"], ["log", "-p", "-1"], ["show", "HEAD"]):
        run_git(repo, args)
    assert list(pwned.iterdir()) == []


HOSTILE_MODULES = (
    "worker/__init__.py",
    "worker/prestart.py",
    "worker/boot.py",
    "engine/__init__.py",
    "engine/node.py",
    "celery/__init__.py",
    "celery/__main__.py",
    "git_filter_repo.py",
    "litellm.py",
    "celeryconfig.py",
    "kombu.py",
    "redis.py",
)


def test_python_packages_in_the_repo_never_run_when_the_command_runs_inside_it(tmp_path: Path) -> None:
    """A user runs ``skill-eval run`` from the repo under evaluation (its folder is the default
    ``--repo``). The repo holds Python modules named like the ones the worker processes import
    (the product's own ``worker`` package, Celery, litellm, git-filter-repo and others), in its
    tree and in ``.git``; each would leave a file outside the repo when imported. Neither the
    worker the command starts nor a warm spare it takes may import any of them."""
    import subprocess
    import sys

    from tests.e2e_support import Env, git_init, new_repo, scenario, write_skill
    from tests.e2e_support import case as e2e_case

    pwned = tmp_path / "pwned"
    pwned.mkdir()
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", [e2e_case(i, f"Say hello {i}.", ["The agent runs echo hello"]) for i in (1, 2)])
    for rel in HOSTILE_MODULES:
        for where in (repo, repo / ".git"):
            path = where / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"open({str(pwned / rel.replace('/', '.'))!r} + '-' + {str(where.name)!r}, 'w').close()\n")
    git_init(repo)
    runtime = Path(tempfile.mkdtemp(prefix="se-", dir="/tmp"))
    runtime.chmod(0o700)
    exe = Path(sys.executable).parent / "skill-eval"  # the console script, as a user types it
    with OfflineModelServer(scenario([{"name": "hi", "tools": True, "replies": [{"text": "hello"}]}], [])) as model:
        env = Env(tmp_path / "e2e", model.base_url, extra={"SKILL_EVAL_WARM": "1", "XDG_RUNTIME_DIR": str(runtime)})
        env.base.mkdir()
        try:
            for attempt in ("cold", "warm"):  # the second takes the spare the first left
                done = subprocess.run(
                    [str(exe), *env.run_args(repo, "greet")],
                    cwd=repo,
                    env=env.env(),
                    capture_output=True,
                    text=True,
                    timeout=180,
                    check=False,
                )
                assert done.returncode in (0, 1), (attempt, done.stdout[-2000:], done.stderr[-2000:])
                assert "not graded (infra): none" in done.stdout, (attempt, done.stdout[-2000:])
                if attempt == "cold":
                    deadline = time.monotonic() + 60
                    while not list((runtime / "skill-eval").glob("*.sock")) and time.monotonic() < deadline:
                        time.sleep(0.1)
                    assert list((runtime / "skill-eval").glob("*.sock")), "the first run left no spare"
        finally:
            subprocess.run(["pkill", "-KILL", "-f", f"--spare {runtime}"], check=False)
            shutil.rmtree(runtime, ignore_errors=True)
    assert sorted(p.name for p in pwned.iterdir()) == []


def test_a_fleet_worker_started_inside_a_repo_never_imports_its_python(tmp_path: Path) -> None:
    """An operator starts ``skill-eval worker`` from a checkout of the repo under evaluation.
    Celery's own loader put the working folder first on ``sys.path`` while it imported the task
    modules, so the repo's ``worker/``, ``engine/``, ``pydantic.py`` or ``structlog.py`` ran on
    the host (``-P`` does not stop that) and the node never came up. The node comes up, runs a
    shard to its grade, and imports none of them."""
    import subprocess
    import sys

    from engine.settings import Settings
    from engine.state import RunState
    from tests.engine_support import make_corpus_repo, scenario, submit_run, wait_until, worker_env

    pwned = tmp_path / "pwned"
    pwned.mkdir()
    folder = tmp_path / "checkout"
    for rel in (*HOSTILE_MODULES, "engine/__init__.py", "schemas/__init__.py", "pydantic.py", "structlog.py"):
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"open({str(pwned / rel.replace('/', '.'))!r}, 'w').close()\n")
    with RedisServer(workdir=tmp_path / "redis") as server, OfflineModelServer(scenario()) as model:
        settings = Settings(broker_url=server.url, store=str(tmp_path / "store"), workdir=tmp_path / "work")
        log = tmp_path / "node.log"
        exe = Path(sys.executable).parent / "skill-eval"
        with log.open("wb") as out:
            node = subprocess.Popen(
                [str(exe), "worker", "--queues", "execute,grade,reduce", "--concurrency", "2", "--name", "inside"],
                cwd=folder,
                env=worker_env(settings),
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        try:
            wait_until(lambda: "ready." in log.read_text() or node.poll() is not None, 90, what="node ready")
            assert node.poll() is None, log.read_text()[-3000:]
            manifest = submit_run(make_corpus_repo(tmp_path / "corpus", cases=2), settings, model.base_url)
            state = RunState(redis.Redis.from_url(server.url))
            wait_until(lambda: state.reduced(manifest.plan.run_id), 90, what="run reduced")
        finally:
            node.terminate()
            node.wait(30)
    assert sorted(p.name for p in pwned.iterdir()) == []
