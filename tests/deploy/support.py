"""Helpers for the deployment tests: the manifests as parsed documents, and `skill-eval worker` nodes.

Workers here are the real product command (``skill-eval worker``, which execs ``python -m worker.boot``)
in their own session; ``terminate`` signals only the node's main process, as Kubernetes and
Docker do (SIGTERM to PID 1), so the pool's children see what they would see in a pod.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from engine.settings import Settings
from tests.engine_support import wait_until, worker_env

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
COMPOSE = ROOT / "deploy" / "compose.yaml"
SKILL_EVAL = str(Path(sys.executable).with_name("skill-eval"))


def k8s_documents() -> Iterator[tuple[str, dict[str, Any]]]:
    """(file, document) for every resource the kustomization lists."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((K8S / name).read_text()):
            if doc:
                yield name, doc


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for _, d in k8s_documents() if d["kind"] == kind}


def container_args(deployment: dict[str, Any]) -> list[str]:
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def config_value(key: str) -> str:
    return str(by_kind("ConfigMap")["skill-eval-config"]["data"][key])


class CliWorker:
    """One ``skill-eval worker`` node on this machine."""

    def __init__(
        self, settings: Settings, name: str, log: Path, *, queues: str, concurrency: int = 1, **env: str
    ) -> None:
        self.name, self.log = name, log
        self.cmd = [SKILL_EVAL, "worker", "--queues", queues, "--concurrency", str(concurrency), "--name", name]
        environment = {**worker_env(settings), "SKILL_EVAL_NODE_BEAT_S": "0.5", **env}
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.cmd,
                env=environment,
                cwd=ROOT,
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def ready(self) -> bool:
        return "ready." in self.text()

    def wait_ready(self, timeout_s: float = 60) -> CliWorker:
        wait_until(lambda: self.ready() or self.proc.poll() is not None, timeout_s, what=f"{self.name} ready")
        assert self.proc.poll() is None, f"{shlex.join(self.cmd)} exited:\n{self.text()[-3000:]}"
        return self

    def terminate(self) -> None:
        """SIGTERM to the node's main process only, as an orchestrator scaling down sends it."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)

    def stop(self) -> None:
        """End the node and everything in its session, whatever state it is in."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):  # leftovers of an exited node
            os.killpg(self.proc.pid, signal.SIGKILL)


def health(settings: Settings, name: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``skill-eval worker --health --name NAME`` as a probe runs it."""
    return subprocess.run(
        [SKILL_EVAL, "worker", "--health", "--name", name],
        env={**worker_env(settings), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
