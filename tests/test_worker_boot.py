"""A worker node booted from its description (worker/boot.py), not through Celery's command line.

Real parts: Celery itself builds both workers (only ``start`` is replaced, to catch the built
worker before it connects), real processes, a real redis-server for the node that runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.node import WorkerNode
from engine.settings import Settings
from schemas.constants import ALL_QUEUES, CONSUME_ORDER, LITELLM_PRELOAD_ENV
from tests.engine_support import worker_env

PROBE = """
import json, sys
import celery.apps.worker as apps_worker
from engine.node import WorkerNode

built = {}
apps_worker.Worker.start = lambda self: built.setdefault("worker", self)  # built, never connected
node = WorkerNode.from_json(sys.argv[2])
if sys.argv[1] == "boot":
    from worker.boot import build_worker
    built["worker"] = build_worker(node)
else:
    from celery.bin.celery import celery
    celery.main(
        ["-A", "worker.tasks", "worker", "-Q", ",".join(node.queues), "-c", str(node.concurrency),
         "-P", "threads", "-n", node.name, "--prefetch-multiplier", "1", "--without-gossip",
         "--without-mingle", "--without-heartbeat", "-l", node.loglevel],
        standalone_mode=False,
    )
w = built["worker"]
print(json.dumps({
    "hostname": w.hostname,
    "pool": w.pool_cls.__module__ + "." + w.pool_cls.__name__,
    "concurrency": w.concurrency,
    "prefetch_multiplier": w.prefetch_multiplier,
    "consume_from": list(w.app.amqp.queues.consume_from),
    "loglevel": int(w.loglevel),
    "consumer_steps": {s.name: getattr(s, "enabled", None) for s in w.consumer.blueprint.steps.values()},
    "broker": w.app.conf.broker_url,
    "acks_late": w.app.conf.task_acks_late,
    "attributes": sorted(vars(w)),
    "cli_loaded": "celery.bin.celery" in sys.modules,
}, sort_keys=True))
"""


def _built(how: str, node: WorkerNode, broker_url: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-P", "-c", PROBE, how, node.to_json()],
        env=worker_env(Settings(broker_url=broker_url, store="/nonexistent")),
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_booted_worker_is_the_one_celery_s_command_line_builds() -> None:
    node = WorkerNode(("execute", "grade", "reduce"), 7, "probe@localhost", "INFO")
    booted = _built("boot", node, "redis://127.0.0.1:1/5")
    by_cli = _built("cli", node, "redis://127.0.0.1:1/5")
    assert booted.pop("cli_loaded") is False  # the point: none of the command line's modules
    assert by_cli.pop("cli_loaded") is True
    assert booted == by_cli
    assert booted["pool"] == "celery.concurrency.thread.TaskPool"
    assert booted["concurrency"] == 7 and booted["prefetch_multiplier"] == 1
    assert booted["consume_from"] == list(CONSUME_ORDER)
    steps = booted["consumer_steps"]
    assert isinstance(steps, dict)
    assert not any(
        enabled for name, enabled in steps.items() if name.rsplit(".", 1)[-1] in ("Gossip", "Mingle", "Heart")
    )


def test_a_node_takes_its_queues_in_consume_order_once_each() -> None:
    node = WorkerNode.serving("execute,grade,execute,reduce", 4, "n@h")
    assert node.queues == CONSUME_ORDER
    assert WorkerNode.from_json(node.to_json()) == node
    assert WorkerNode.serving("execute", 1, "n@h").queues == ("execute",)


@pytest.mark.parametrize(
    ("queues", "concurrency", "why"), [((), 2, "at least one queue"), (ALL_QUEUES, 0, "at least one slot")]
)
def test_a_node_without_queues_or_slots_is_refused(queues: tuple[str, ...], concurrency: int, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        WorkerNode(queues, concurrency, "n@h")


@pytest.mark.parametrize(
    "arg", ["not json", '{"queues": ["execute"]}', '{"queues": [], "concurrency": 1, "name": "x"}']
)
def test_the_boot_module_names_a_malformed_node_and_exits_non_zero(arg: str) -> None:
    done = subprocess.run(
        [sys.executable, "-P", "-m", "worker.boot", arg], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert "worker.boot: not a worker node" in done.stderr


@contextlib.contextmanager
def booted(node: WorkerNode, env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The node's process, once its log says it is ready; killed with its session if still running after."""
    with log.open("wb") as out:
        proc = subprocess.Popen(node.command(), env=env, cwd="/", stdout=out, stderr=out, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "ready." not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_booted_node_connects_and_reports_ready(tmp_path: Path, settings: Settings) -> None:
    node = WorkerNode(ALL_QUEUES, 2, "boot-test@localhost", loglevel="INFO")
    log = tmp_path / "node.log"
    with booted(node, worker_env(settings), log) as proc:
        assert "boot-test@localhost ready." in log.read_text(errors="replace")
        proc.terminate()
        assert proc.wait(30) == 0  # a warm shutdown on SIGTERM, as Celery's command line does it


STUCK_LITELLM = """
import time


class _Handler:
    def __del__(self):
        import litellm.types  # noqa: F401  # an import at collection, as litellm's HTTP handlers make


HANDLERS = [_Handler()]
time.sleep(300)  # the import is still running when the node is told to stop
"""


def test_a_node_told_to_stop_while_its_warm_up_still_imports_litellm_exits(tmp_path: Path, settings: Settings) -> None:
    """The interpreter's teardown would freeze the importing thread holding litellm's module lock,
    then collect a handler whose finalizer imports from litellm: a process that never exits."""
    fake = tmp_path / "site" / "litellm"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(STUCK_LITELLM)
    node = WorkerNode(ALL_QUEUES, 1, "stuck-import@localhost", loglevel="INFO")
    env = {**worker_env(settings), "PYTHONPATH": str(fake.parent), LITELLM_PRELOAD_ENV: "1"}
    log = tmp_path / "node.log"
    with booted(node, env, log) as proc:
        proc.terminate()
        assert proc.wait(20) == 0, log.read_text(errors="replace")
