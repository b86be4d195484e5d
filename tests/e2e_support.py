"""Helpers for the end-to-end tests: small skill repos, scripted scenarios, the CLI as a subprocess.

Everything here builds real inputs (git repos on disk, scenario dicts for the offline model
server) and runs the real ``skill-eval`` command; nothing is mocked.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testkit.judge import calibration_judge_rules as judge_rules

ROOT = Path(__file__).resolve().parent.parent
RUN_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{8}$")
GIT = ["git", "-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "-c", "commit.gpgsign=false"]


# --- repos ------------------------------------------------------------------------------------
def case(
    case_id: int,
    prompt: str,
    assertions: list[Any],
    *,
    files: list[str] | None = None,
    fixtures: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """One eval case of schema v1 (``files`` defaults to the repo's README.md)."""
    out: dict[str, Any] = {
        "id": case_id,
        "prompt": prompt,
        "expected_output": "The agent does what the prompt asks and nothing else.",
        "files": files if files is not None else ["README.md"],
        "assertions": assertions,
    }
    if fixtures is not None:
        out["fixtures"] = fixtures
    return out


def write_skill(repo: Path, skill: str, cases: list[dict[str, Any]], skill_text: str | None = None) -> None:
    """``skills/<skill>/SKILL.md`` and ``evals/<skill>.evals.json``."""
    skill_dir = repo / "skills" / skill
    skill_dir.mkdir(parents=True, exist_ok=True)
    (skill_dir / "SKILL.md").write_text(skill_text or f"# {skill}\n\nDo what the user asks, with shell commands.\n")
    (repo / "evals").mkdir(exist_ok=True)
    corpus = {"skill_name": skill, "evals": cases}
    (repo / "evals" / f"{skill}.evals.json").write_text(json.dumps(corpus, indent=2))


def git_init(repo: Path) -> None:
    """Make ``repo`` a git repository with everything committed on branch ``main``."""
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "e2e repo"]):
        subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True)


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("# e2e repo\n\nA small repo for end-to-end tests.\n")
    return path


# --- scenarios -------------------------------------------------------------------------------
def shell_rule(prompt_marker: str, commands: list[str], *, model: str | None = None) -> dict[str, Any]:
    """An executor script: for the case whose prompt holds ``prompt_marker``, run ``commands``, then stop."""
    replies: list[dict[str, Any]] = [{"tool_calls": [{"name": "shell", "arguments": {"command": c}}]} for c in commands]
    replies.append({"text": f"(scripted) ran {len(commands)} command(s)."})
    rule: dict[str, Any] = {"name": f"{prompt_marker}/{model or 'any'}", "tools": True, "contains": prompt_marker}
    if model is not None:
        rule["model"] = model
    rule["replies"] = replies
    return rule


def ran(marker: str) -> dict[str, str]:
    """A judge rule: an assertion mentioning ``marker`` passes when a shell call ran it."""
    return {"assertion_contains": marker, "transcript_regex": r"\[tool_call\] shell\(.*" + re.escape(marker)}


def never_ran(marker: str) -> dict[str, str]:
    """A judge rule: an assertion mentioning ``marker`` passes when no shell call ran it."""
    return {**ran(marker), "expect": "absent"}


def scenario(rules: list[dict[str, Any]], judge: list[dict[str, str]]) -> dict[str, Any]:
    """A scenario whose judge also passes the built-in calibration honestly (its rules come first)."""
    return {"rules": rules, "judge": [*judge_rules(), *judge], "default": {"text": "(scripted) no script."}}


# --- the command -----------------------------------------------------------------------------
@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str
    pid: int

    def field(self, prefix: str) -> list[str]:
        """Values of every stdout line starting with ``prefix`` (the COMPLETE block's lines)."""
        return [line[len(prefix) :].strip() for line in self.stdout.splitlines() if line.startswith(prefix)]

    @property
    def run_id(self) -> str:
        return self.field("run:")[0]


@dataclass
class Env:
    """Where one test's runs put things: store, reports, run log, temp files (cluster dirs)."""

    base: Path
    api_base: str
    extra: dict[str, str] = field(default_factory=dict)
    """More environment for the command (engine settings such as ``SKILL_EVAL_STREAM_REDUCE_SHARDS``)."""

    @property
    def store(self) -> Path:
        return self.base / "store"

    @property
    def out(self) -> Path:
        return self.base / "reports"

    @property
    def run_log(self) -> Path:
        return self.base / "runs.log"

    @property
    def tmp(self) -> Path:
        return self.base / "tmp"

    @property
    def config(self) -> Path:
        """A model config with a short retry budget, so scripted faults end quickly."""
        path = self.base / "skill-eval.toml"
        if not path.exists():
            path.write_text("[retry]\nmax_attempts = 2\nbase_delay_s = 0.05\nmax_delay_s = 0.1\n")
        return path

    def env(self) -> dict[str, str]:
        self.tmp.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SKILL_EVAL_")}
        env.update(
            SKILL_EVAL_RUN_LOG=str(self.run_log),
            XDG_DATA_HOME=str(self.base / "data"),
            # The embedded cluster's redis dir and worker log land here, so pgrep can find our processes.
            TMPDIR=str(self.tmp),
            OPENAI_API_KEY="sk-offline-scripted",
            # No warm spare left behind, even when the suite runs on a terminal (the tests of the
            # spare turn it on).
            SKILL_EVAL_WARM="0",
        )
        env.update(self.extra)
        return env

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``skill-eval ARGS`` (its entry point, ``python -m producer``) with this env, started; stdout and
        stderr piped."""
        return subprocess.Popen(
            [sys.executable, "-m", "producer", *args],
            cwd=ROOT,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def cli(self, *args: str, timeout_s: float = 150.0) -> CliResult:
        """``skill-eval ARGS`` with this env, to its end; stdout and stderr captured."""
        return self.finish(self.start(*args), args, timeout_s)

    def finish(self, proc: subprocess.Popen[str], args: tuple[str, ...] = (), timeout_s: float = 150.0) -> CliResult:
        """Wait for a started command and collect what it printed."""
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)  # like Ctrl-C: the command stops its embedded cluster
            try:
                stdout, stderr = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
            raise AssertionError(f"skill-eval {' '.join(args)} timed out\n{stdout}\n{stderr}") from None
        return CliResult(proc.returncode, stdout, stderr, proc.pid)

    def run(self, repo: Path, *args: str, models: tuple[str, ...] = ("openai/exec-a",)) -> CliResult:
        """``skill-eval run`` against the offline server with this env's store, out and config."""
        return self.cli(*self.run_args(repo, *args, models=models))

    def run_args(
        self, repo: Path, *args: str, models: tuple[str, ...] = ("openai/exec-a",), workers: int = 2
    ) -> tuple[str, ...]:
        """``skill-eval run`` with this env's places; an option given twice is refused, so ``--workers`` is set here."""
        model_args = [a for m in models for a in ("--model", m)]
        return (
            "run",
            *args,
            "--repo",
            str(repo),
            *model_args,
            "--judge",
            "openai/judge",
            "--api-base",
            self.api_base,
            *self.place_args(),
            "--workers",
            str(workers),
        )

    def place_args(self) -> tuple[str, ...]:
        """``--store``, ``--out`` and ``--config`` of this env, for any command that runs."""
        return ("--store", str(self.store), "--out", str(self.out), "--config", str(self.config))


@contextlib.contextmanager
def checked_env(base: Path, api_base: str) -> Iterator[Env]:
    """An :class:`Env` under ``base``; when the test is done, nothing its commands started may be
    alive (any that are get killed, by pid, so one failure does not burden the next tests)."""
    env = Env(base, api_base)
    env.base.mkdir()
    yield env
    left = processes_using(env.tmp)
    # A process already killed may take a moment to leave /proc on a loaded machine (a sandbox
    # tearing down its pid namespace); one that is still there after this is a survivor.
    deadline = time.monotonic() + 10
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = {pid: cmd for pid, cmd in left.items() if alive([pid])}
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == {}, f"still running after the test: {left}"


def leftover_processes(marker: str) -> list[str]:
    """Command lines of live processes whose command line mentions ``marker`` (``pgrep -af``)."""
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if line.strip() and "pgrep" not in line]


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter) of a process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), fields[0]


def descendants(pid: int) -> dict[int, str]:
    """Pid -> command line of every live descendant of ``pid``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            children.setdefault(st[0], []).append(int(entry.name))
    out, todo = {}, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        try:
            out[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        todo += children.get(child, [])
    return out


def processes_using(folder: Path) -> dict[int, str]:
    """Pid -> command line of live processes with ``folder`` in their environment or an open file in it.

    Whatever a test's command starts inherits its environment (``TMPDIR=<folder>``) and the
    embedded cluster keeps its redis and worker logs open in there; redis-server rewrites its
    command line and environment block, but not its open files.
    """
    prefix = str(folder)
    needle = f"={prefix}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not alive([int(entry.name)]):
            continue
        try:
            hit = needle in (entry / "environ").read_bytes()
            if not hit:
                for fd in (entry / "fd").iterdir():
                    with contextlib.suppress(OSError):
                        if os.readlink(fd).startswith(prefix):
                            hit = True
                            break
            if hit:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return found


def alive(pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` still running (zombies count as gone: they hold nothing)."""
    return [p for p in pids if (st := _stat(p)) is not None and st[1] != "Z"]


def reports(out: Path, skill: str, run_id: str) -> tuple[dict[str, Any], str]:
    """The JSON and markdown reports of ``skill`` in run ``run_id``."""
    stem = out / f"skill-eval-{skill}-{run_id}"
    return json.loads(stem.with_suffix(".json").read_text()), stem.with_suffix(".md").read_text()


def current(doc: dict[str, Any]) -> dict[str, Any]:
    """The ``current`` variant of a JSON report."""
    return next(v for v in doc["variants"] if v["variant"] == "current")
