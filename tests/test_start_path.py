"""What a run's start-up leaves out: pydantic plugins in the command and its workers, and the
Celery result backend in the producer (both read every installed package's metadata)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, new_repo, scenario, write_skill
from tests.e2e_support import case as e2e_case

ROOT = Path(__file__).resolve().parent.parent


def _spy_plugin(folder: Path) -> Path:
    """An installed pydantic plugin that notes each process that loads it, and what it is."""
    folder.mkdir(parents=True)
    marks = folder / "loaded"
    (folder / "spy_plugin.py").write_text(
        textwrap.dedent(
            f"""
            import os, sys
            with open({str(marks)!r}, "a") as f:
                f.write(" ".join(sys.argv[:3]) + "\\n")

            class _Spy:
                def new_schema_validator(self, *args, **kwargs):
                    return None, None, None

            plugin = _Spy()
            """
        )
    )
    info = folder / "spy_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: spy-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\nspy = spy_plugin:plugin\n")
    return marks


def _run(tmp_path: Path, extra: dict[str, str]) -> list[str]:
    plugin_dir = tmp_path / "site"
    marks = _spy_plugin(plugin_dir)
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", [e2e_case(i, f"Say hello {i}.", ["The agent runs echo hello"]) for i in (1, 2)])
    script = [{"name": "greet", "tools": True, "replies": [{"text": "hello"}]}]
    with OfflineModelServer(scenario(script, [])) as server:
        env = Env(tmp_path / "e2e", server.base_url, extra={"PYTHONPATH": str(plugin_dir), **extra})
        env.base.mkdir()
        done = env.cli(*env.run_args(repo, "greet"))
    assert done.code in (0, 1), done.stderr[-2000:]
    assert "not graded (infra): none" in done.stdout, done.stdout[-2000:]
    return marks.read_text().splitlines() if marks.exists() else []


def test_no_pydantic_plugin_sees_the_command_or_its_worker(tmp_path: Path) -> None:
    """A plugin would see every value the product validates (keys and agents' output among them)."""
    assert _run(tmp_path, {}) == []


def test_a_user_who_wants_their_pydantic_plugins_gets_them_in_the_command_and_the_worker(tmp_path: Path) -> None:
    loaded = _run(tmp_path, {"PYDANTIC_DISABLE_PLUGINS": "none"})
    assert any(line.endswith("run greet") for line in loaded), loaded  # the command
    assert any("worker/prestart" in line for line in loaded), loaded  # its worker


def test_the_producer_sends_without_looking_for_a_result_backend(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import redis
        from celery.utils.imports import load_extension_class_names
        from engine.redis_server import RedisServer
        from engine.settings import Settings
        from producer.launch.cluster import task_sender
        from pathlib import Path
        with RedisServer(workdir=Path({str(tmp_path)!r})) as server:
            publisher = task_sender(Settings(broker_url=server.url), manifest=None)
            publisher.preflight("run-1", "execute")
            sent = redis.Redis.from_url(server.url).llen("execute")
            print(sent, load_extension_class_names.cache_info().currsize)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0"]  # the message is queued; no backend plugin was looked for
