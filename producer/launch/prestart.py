"""An embedded run's worker, started before the command line has imported.

An embedded run's first model call waits for its worker process to start, and that start is
mostly imports (Python, Celery and, above all, litellm: seconds of CPU). The command line's
own imports and planning came first and took about another second. So the entry point looks
at its arguments before importing anything beyond the standard library: a ``run`` that will
open an embedded cluster spawns ``python -m worker.prestart`` at once, on the other core,
which imports the heavy modules and then waits on its stdin for what only the cluster knows
(the private Redis, the settings, the log file, the worker's arguments).
:class:`producer.launch.embedded.EmbeddedCluster` takes that process instead of spawning one.

A command that never opens the cluster (a BLOCKED check, a usage error) exits with the pipe
unwritten: the waiting process reads end-of-file and exits. It is tied to the command's main
thread (PR_SET_PDEATHSIG) and has its own session, like the worker it becomes.

The command is often started inside the repo under evaluation, so no worker process runs in
the command's folder or has it on its import path: ``python -P`` (no script or working folder
on ``sys.path``), started in ``/`` and moved to the cluster's private folder with its order.
Otherwise a repo holding a ``worker/`` or ``celery/`` package would run on the host.

The entry point (producer/entry.py) fills :data:`WAITING`. Where a warm spare is enabled
(producer/launch/warm.py), it first claims the spare an earlier run left, already imported, and
spawns a process only when there is none; and on its way out it leaves a spare for the next command.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from engine.node import WorkerNode
from producer.launch import warm


class WorkerProcess(Protocol):
    """What the embedded cluster needs of a worker process: a spawned ``Popen`` or a claimed spare."""

    @property
    def pid(self) -> int: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


def opens_embedded_cluster(args: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether ``skill-eval <args>`` is a run on an embedded cluster (a guess: a miss costs nothing).

    A ``run`` with no broker (neither ``--broker`` nor SKILL_EVAL_BROKER_URL) that is not a
    ``--dry-run`` and asks for no help.
    """
    command = next((a for a in args if not a.startswith("-")), None)
    if command != "run" or environ.get("SKILL_EVAL_BROKER_URL"):
        return False
    flags = {a.split("=", 1)[0] for a in args if a.startswith("-")}
    return not flags & {"--broker", "--dry-run", "--help", "-h"}


def _values(args: Sequence[str], flag: str) -> list[str]:
    found = []
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            found.append(args[i + 1])
        elif arg.startswith(flag + "="):
            found.append(arg.split("=", 1)[1])
    return found


def needs_litellm(args: Sequence[str]) -> bool:
    """Whether ``skill-eval <args>`` may call a model through litellm (a guess: a miss costs only time).

    Not when the built-in agent's every executor and judge model is named ``openai/...`` and
    ``--api-base`` points them at an OpenAI-compatible endpoint: those calls go straight over
    HTTP (worker/models/direct.py). A model config that routes one of them through litellm
    after all makes the worker import it on that model's first call instead of ahead of it.
    """
    models, judges = _values(args, "--model"), _values(args, "--judge")
    executors = _values(args, "--executor") or ["agent"]  # a sweep names several
    if executors != ["agent"] * len(executors) or not _values(args, "--api-base") or not models or not judges:
        return True
    return not all(name.startswith("openai/") for name in models + judges)


class Waiting:
    """The one worker process this command started (or claimed) early, until the cluster takes it.

    Taken once: a second cluster in the same command (none today) spawns its own worker.
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | warm.ClaimedSpare | None = None

    def claim(self, environ: Mapping[str, str]) -> bool:
        """Hold the warm spare an earlier run left, if there is one; whether there was."""
        self._proc = warm.claim(environ)
        return self._proc is not None

    def spawn(self) -> None:
        """Start the waiting worker process (see the module docstring)."""
        from engine.redis_server import die_with_parent

        self._proc = subprocess.Popen(
            [sys.executable, "-P", "-m", warm.PRESTART_MODULE],
            cwd="/",
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )

    def take(self, node: WorkerNode, env: Mapping[str, str], log_path: Path, *, cwd: Path) -> WorkerProcess | None:
        """Hand the waiting process its worker node, environment and folder; the process, or None when there is none."""
        proc, self._proc = self._proc, None
        order = {"node": node.to_json(), "env": dict(env), "log": str(log_path), "cwd": str(cwd)}
        if isinstance(proc, warm.ClaimedSpare):
            return proc if proc.poll() is None and proc.send_order(order) else None
        if proc is None or proc.stdin is None or proc.poll() is not None:
            return None
        try:
            proc.stdin.write(json.dumps(order).encode() + b"\n")
            proc.stdin.close()
        except OSError:  # it died meanwhile: the caller spawns a worker as before
            proc.kill()
            proc.wait()
            return None
        return proc


WAITING = Waiting()
"""This command's early worker: the entry point (producer/entry.py) fills it, the embedded cluster takes it."""
