"""A run that ends without a result says so: refused by its checks, or its embedded run stopped.

The record the producer leaves (``runs/<run>/end.json``) and what ``status`` makes of it, then
Ctrl-C on the real command. The viewer's pages are in tests/viewer/test_api.py, the whole
refused run through the real command in tests/test_preflight.py.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
import redis
from rich.console import Console
from typer.testing import CliRunner

from engine.records import load_run_end, put_manifest, put_run_end
from engine.redis_server import RedisServer
from engine.settings import shown_url
from engine.state import RunState
from engine.store import LocalStore
from producer.commands.cli import app
from producer.launch.progress import RunStalled
from producer.launch.stopped import NOTHING_RUNS_IT, Stopped, ended_if_stopped
from producer.results.status_view import end_lines, progress_words, status_view
from schemas.manifest import RunManifest
from schemas.run_end import RunEnd
from schemas.shard import RunPlan
from schemas.summary import RunStatus
from testkit.offline_server import OfflineModelServer
from tests.conftest import EXAMPLE_REPO
from tests.e2e_support import Env, case, new_repo, scenario, write_skill
from viewer.data import ViewerData

RUN = "20260101-000000-0000cafe"


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    store = LocalStore(tmp_path / "store")
    plan = RunPlan(run_id=RUN, bundles=(), models=("openai/m",), judges=("openai/j",), shards=())
    put_manifest(store, RunManifest(plan=plan, snapshots={}))
    return store


def test_ctrl_c_on_an_embedded_run_records_it_interrupted(store: LocalStore) -> None:
    with pytest.raises(KeyboardInterrupt), ended_if_stopped(store, RUN, embedded=True) as driving:
        driving.sent = True
        raise KeyboardInterrupt
    end = load_run_end(store, RUN)
    assert end is not None and end.how == "interrupted" and end.reason == "Ctrl-C before the run finished"


def test_an_embedded_run_whose_workers_died_records_the_stall_without_the_log_tail(store: LocalStore) -> None:
    with pytest.raises(RunStalled), ended_if_stopped(store, RUN, embedded=True):
        raise RunStalled("the workers stopped before the run finished\nlast worker log lines:\nTraceback ...")
    end = load_run_end(store, RUN)
    assert end is not None and end.reason == "RUN_STALLED: the workers stopped before the run finished"


def test_sigterm_on_an_embedded_run_records_it_interrupted_and_names_the_run(store: LocalStore) -> None:
    said: list[str] = []
    with pytest.raises(Stopped) as stopped, ended_if_stopped(store, RUN, embedded=True, say=said.append) as driving:
        driving.sent = True
        raise Stopped(signal.SIGTERM)
    assert stopped.value.code == 143  # the shell's code for a process SIGTERM ended
    end = load_run_end(store, RUN)
    assert end is not None and end.how == "interrupted" and end.reason == "SIGTERM before the run finished"
    assert said == [
        f"run: {RUN}",
        "SIGTERM before the run finished: nothing runs it any more, so its end is recorded interrupted; "
        f"`skill-eval report {RUN}` reduces what ended",
    ]


@pytest.mark.parametrize("sent", [True, False])
def test_the_line_a_stopped_command_prints_is_the_one_the_usage_guide_quotes(store: LocalStore, sent: bool) -> None:
    """docs/usage.md ("A stopped command gives no verdict") quotes what the command says became of the run."""
    said: list[str] = []
    with pytest.raises(Stopped), ended_if_stopped(store, RUN, embedded=True, say=said.append) as driving:
        driving.sent = sent
        raise Stopped(signal.SIGTERM)
    guide = " ".join((Path(__file__).parents[1] / "docs" / "usage.md").read_text(encoding="utf-8").split())
    assert said[1].replace(RUN, "<id>") in guide, said[1]


def test_a_run_on_a_fleet_goes_on_without_its_command_so_nothing_is_recorded(store: LocalStore) -> None:
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt), ended_if_stopped(store, RUN, embedded=False, say=said.append) as driving:
        driving.sent = True
        raise KeyboardInterrupt
    assert load_run_end(store, RUN) is None
    assert said[0] == f"run: {RUN}" and f"`skill-eval status {RUN}` follows it" in said[1]


def test_a_fleet_run_stopped_before_any_shard_was_sent_records_it_interrupted(store: LocalStore) -> None:
    said: list[str] = []
    with pytest.raises(Stopped), ended_if_stopped(store, RUN, embedded=False, say=said.append):
        raise Stopped(signal.SIGTERM)  # during the preflight: nothing was sent, nothing will run it
    end = load_run_end(store, RUN)
    assert end is not None and end.how == "interrupted" and end.reason == "SIGTERM before any shard was sent"
    assert said == [
        f"run: {RUN}",
        "SIGTERM before any shard was sent: nothing ran, and its end is recorded interrupted; "
        "`skill-eval run` again to run it",
    ]


def test_a_fleet_run_its_broker_lost_records_it_interrupted(store: LocalStore) -> None:
    with pytest.raises(RunStalled), ended_if_stopped(store, RUN, embedded=False) as driving:
        driving.sent = True
        raise RunStalled(f"the broker no longer knows run {RUN}")
    end = load_run_end(store, RUN)
    assert end is not None and end.reason == f"RUN_STALLED: the broker no longer knows run {RUN}"


def test_nothing_is_recorded_for_a_run_never_stored(tmp_path: Path) -> None:
    empty = LocalStore(tmp_path / "empty")
    with pytest.raises(KeyboardInterrupt), ended_if_stopped(empty, RUN, embedded=True):
        raise KeyboardInterrupt
    assert not (tmp_path / "empty").exists()


def test_status_prints_a_reason_holding_console_markup_as_it_is(store: LocalStore, tmp_path: Path) -> None:
    """A reason quotes model names and provider errors: printed as text, never read as console markup."""
    why = "BLOCKED_MODEL_UNAVAILABLE: openai/[bold]m[/]: [Errno 111] refused"
    put_run_end(store, RunEnd(run_id=RUN, how="blocked", reason=why))
    shown = CliRunner().invoke(app, ["status", RUN, "--store", str(tmp_path / "store")])
    assert shown.exit_code == 0, shown.output
    assert why in shown.output


def test_status_prints_model_names_holding_console_markup_as_they_are() -> None:
    """``[/]`` in a model name made ``status`` crash (a closing tag with nothing to close)."""
    usage = {"openai/[bold]m[/]": {"calls": 1, "prompt_tokens": 2, "completion_tokens": 3, "cost_usd": None}}
    console = Console(record=True, width=200)
    console.print(status_view(_status(usage=usage)))
    assert "openai/[bold]m[/]" in console.export_text()


def _status(**fields: object) -> RunStatus:
    base: dict[str, object] = dict(run_id=RUN, source="store", total=2, states={"queued": 2}, done=False, terminal=0)
    return RunStatus.model_validate({**base, **fields})


def test_status_says_blocked_and_why_for_a_refused_run_and_never_running() -> None:
    why = "BLOCKED_MODEL_UNAVAILABLE: anthropic/m: ANTHROPIC_API_KEY not set"
    doc = _status(end=RunEnd(run_id=RUN, how="blocked", reason=why))
    assert progress_words(doc) == "BLOCKED (from the store)" and end_lines(doc) == [why]
    stopped = _status(end=RunEnd(run_id=RUN, how="interrupted", reason="Ctrl-C before the run finished"))
    assert progress_words(stopped) == "interrupted (from the store)"
    assert end_lines(stopped) == [f"Ctrl-C before the run finished; `skill-eval report {RUN}` reduces what ended"]


def _state_rows(doc: RunStatus) -> list[str]:
    console = Console(record=True, width=200)
    console.print(status_view(doc))
    return [" ".join(line.split()) for line in console.export_text().splitlines()]


def test_status_says_the_shards_of_a_run_known_not_to_go_on_never_will_end() -> None:
    """Once the run is known not to be going on (interrupted, or lost with its broker), its shards
    not ended are not called queued or running: the state row says what became of them."""
    stopped = _status(end=RunEnd(run_id=RUN, how="interrupted", reason="SIGTERM before the run finished"), not_ended=2)
    assert "not ended (never will: interrupted) 2" in _state_rows(stopped)
    lost = _status(lost_by="redis://127.0.0.1:6379/0", not_ended=2)
    assert "not ended (lost with the broker) 2" in _state_rows(lost)
    for doc in (stopped, lost):
        assert not any("queued or running" in row for row in _state_rows(doc))
    assert "not ended (queued or running) 2" in _state_rows(_status(not_ended=2))  # it may still be going


def test_status_calls_a_run_running_only_on_the_brokers_word() -> None:
    assert progress_words(_status()) == "not done (from the store)"
    assert "only its broker knows" in end_lines(_status())[0]
    assert progress_words(_status(source="broker")) == "running (live, from the broker)"
    assert progress_words(_status(source="broker", stalled=True)) == "STALLED (live, from the broker)"
    assert progress_words(_status(done=True, terminal=2)) == "done (from the store)"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("sig", "code", "why"),
    [
        (signal.SIGINT, 130, "Ctrl-C before the run finished"),
        (signal.SIGTERM, 143, "SIGTERM before the run finished"),  # a cancelled CI job
    ],
)
def test_a_signal_on_a_real_embedded_run_leaves_it_interrupted_in_status_and_the_viewer(
    tmp_path: Path, sig: signal.Signals, code: int, why: str
) -> None:
    """The real command on its embedded cluster, its agent's model never answering: Ctrl-C or SIGTERM
    stops it, the command names the run, and the stored run says interrupted, not running, wherever
    it is read."""
    hang = {"contains": "Say hello", "tools": True, "replies": [{"hang": True}]}
    with OfflineModelServer(scenario([hang], [])) as server:
        env = Env(tmp_path / "e2e", server.base_url)
        env.base.mkdir()
        repo = new_repo(tmp_path / "repo")
        write_skill(repo, "greet", [case(i, f"Say hello {i}.", ["The agent runs echo hello"]) for i in (1, 2)])
        models = ("--model", "openai/exec", "--judge", "openai/judge", "--api-base", env.api_base)
        proc = env.start("run", "greet", "--repo", str(repo), *env.place_args(), *models, "--no-calibration")
        deadline = time.monotonic() + 120
        while not any("Say hello" in json.dumps(r) for r in server.requests()):  # a shard is out
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(sig)
        done = env.finish(proc, timeout_s=60)
    assert done.code == code, done.stderr
    (run_dir,) = env.store.glob("runs/*")
    stopped = f"{why}: {NOTHING_RUNS_IT}; `skill-eval report {run_dir.name}` reduces what ended"
    assert f"run: {run_dir.name}\n{stopped}" in done.stderr
    end = load_run_end(LocalStore(env.store), run_dir.name)
    assert end is not None and end.how == "interrupted" and end.reason == why
    status = env.cli("status", run_dir.name, "--store", str(env.store))
    assert status.stdout.startswith(f"run {run_dir.name}: interrupted (from the store)"), status.stdout
    (item,) = ViewerData(LocalStore(env.store)).runs()
    assert item["ended"] == "interrupted" and item["running"] is False and item["verdict"] is None


@pytest.mark.timeout(120)
def test_sigterm_to_the_command_waiting_for_a_fleet_run_names_it_and_how_to_follow_it(
    tmp_path: Path, broker: RedisServer
) -> None:
    """A cancelled CI job stops the command, not the run: the fleet goes on, and the command says which
    run and how to follow it, exiting as the shell reports SIGTERM (143), not with a verdict."""
    env = Env(tmp_path / "e2e", "http://127.0.0.1:9/v1")  # no worker serves the run: it never ends
    env.base.mkdir()
    models = ("--model", "openai/m", "--judge", "openai/j", "--no-preflight", "--broker", broker.url)
    proc = env.start("run", "commit-message", "--repo", str(EXAMPLE_REPO), *env.place_args(), *models)
    state, deadline = RunState(redis.Redis.from_url(broker.url)), time.monotonic() + 90
    while not state.active_runs():  # submitted: the command now waits for the fleet
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    done = env.finish(proc, timeout_s=60)
    (run_id,) = state.active_runs()
    assert done.code == 143, done.stderr
    assert f"run: {run_id}\n" in done.stderr and f"`skill-eval status {run_id}` follows it" in done.stderr
    assert load_run_end(LocalStore(env.store), run_id) is None  # it goes on: nothing says it ended


def test_status_says_a_broker_that_does_not_know_the_run_lost_it(
    store: LocalStore, tmp_path: Path, broker: RedisServer
) -> None:
    """Asked with a broker that answered it has no such run (lost with its data, or expired), status says
    the run is not going on, not that only its broker knows."""
    shown = CliRunner().invoke(app, ["status", RUN, "--store", str(tmp_path / "store"), "--broker", broker.url])
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith(f"run {RUN}: not going on (unknown to its broker; from the store)")
    said = f"the broker at {broker.url} does not know this run (lost with its data, or expired): it is not going on"
    assert said in " ".join(shown.output.split())
    assert "only its broker knows" not in shown.output
    assert f"`skill-eval report {RUN}` gives what was stored" in " ".join(shown.output.split())


def test_status_hides_the_password_of_the_broker_that_lost_the_run() -> None:
    doc = _status(lost_by=shown_url("redis://user:secret@host:6379/0"))
    assert "secret" not in end_lines(doc)[0] and "redis://user:***@host:6379/0" in end_lines(doc)[0]
