"""Attack: names the repo, the corpus or a recording chose reach the terminal inside the CLI's lines.

A raw ESC starts a terminal escape sequence (clear the screen, retitle the window, recolour
what follows); a raw line break starts a line that passes for one of the CLI's own. Each name
below holds both; what the CLI prints holds neither, only their visible escapes.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from rich.table import Table
from rich.text import Text
from typer.testing import CliRunner

from producer.commands.cli import app
from producer.commands.console import InertConsole
from schemas.trajectory import AssistantEvent, Event, ToolCallEvent, ToolResultEvent, Trajectory
from schemas.visible import BLOCK_CONTROL_RE, CONTROL_RE, inert_json, visible, visible_lines
from testkit.offline_server import OfflineModelServer
from tests.conftest import EXAMPLE_REPO
from tests.e2e_support import Env, case, checked_env, git_init, new_repo, ran, scenario, write_skill

FORGED = "FORGED: line"
HOSTILE = f"\x1b]0;pwned-title\x1b\\\x1b[41m\x9b2J\n{FORGED}"
"""A window title, a red background, a C1 clear screen, and a line of its own."""


def assert_inert(output: str) -> None:
    """No control sequence and no forged line; the name shown as its escapes instead."""
    assert "\x1b" not in output and "\x9b" not in output and "\r" not in output, repr(output)
    assert not any(line.lstrip().startswith(FORGED) for line in output.splitlines()), output
    assert "\\x1b]0;pwned-title" in output and f"\\n{FORGED}" in output, output


def invoke(*args: str) -> str:
    # Wide enough that no table folds a hostile name across lines: what is checked is its escaping.
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "240"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.output


@given(st.text())
def test_a_visible_name_holds_no_control_and_is_one_line_and_stable(text: str) -> None:
    shown, block = visible(text), visible_lines(text)
    assert not CONTROL_RE.search(shown) and visible(shown) == shown
    assert not BLOCK_CONTROL_RE.search(block) and visible_lines(block) == block
    assert block.split("\n") == [visible_lines(line) for line in text.split("\n")]
    if text.isprintable():
        assert shown == text


@given(st.recursive(st.text() | st.none(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))
def test_json_for_machines_holds_no_control_and_parses_to_the_same_value(value: object) -> None:
    shown = inert_json(json.dumps(value, ensure_ascii=False, indent=2))
    assert not CONTROL_RE.search(shown.replace("\n", ""))  # the document's own line breaks only
    assert json.loads(shown) == value and inert_json(shown) == shown


def test_the_cli_consoles_escape_every_control_but_the_line_breaks_of_any_renderable() -> None:
    """The boundary: a table cell, a Text or a string printed by any command carries no control
    sequence, whatever its caller forgot; the block's own line feeds stay line feeds."""
    from producer.commands import app as commands

    assert isinstance(commands.out, InertConsole) and isinstance(commands.err, InertConsole)
    console = InertConsole(file=io.StringIO(), force_terminal=True, color_system=None, width=200)
    table = Table("name")
    table.add_row(Text("cell\x1b[2Jend"))
    console.print(table)
    console.print("one\x1b]0;pwned-title\x07\ntwo\rthree\x9b2J\u202eend", markup=False, highlight=False)
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b" not in printed and "\r" not in printed and "\x9b" not in printed and "\u202e" not in printed
    assert "cell\\x1b" in printed  # the table sized the cell for the raw text: the escape is cut, not raw
    assert "one\\x1b]0;pwned-title\\x07\ntwo\\rthree\\x9b2J\\u202eend" in printed


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE_REPO, root)
    return root


def test_a_corpus_file_name_in_the_dry_runs_skipped_lines_is_shown_escaped(repo: Path) -> None:
    (repo / "evals" / f"{HOSTILE}.evals.json").write_text("{not json")
    output = invoke("run", "--all-evals", "--dry-run", "--repo", str(repo))
    assert "skipped evals/\\x1b]0;pwned-title" in output
    assert_inert(output)


def test_a_c1_control_in_a_corpus_file_name_is_escaped_in_the_dry_runs_json(repo: Path) -> None:
    """JSON escapes C0 in its strings but not C1 (U+009B is a CSI on some terminals): --json does."""
    (repo / "evals" / f"{HOSTILE}.evals.json").write_text("{not json")
    output = invoke("run", "--all-evals", "--dry-run", "--json", "--repo", str(repo))
    assert "\x9b" not in output and "\\u009b2J" in output, output
    assert json.loads(output)["skipped"][0]["corpus"] == f"evals/{HOSTILE}.evals.json"


def test_a_c1_control_in_a_model_name_is_escaped_in_status_json(tmp_path: Path) -> None:
    from engine.records import put_manifest, put_run_end
    from engine.store import LocalStore
    from schemas.manifest import RunManifest
    from schemas.run_end import RunEnd
    from schemas.shard import RunPlan

    run_id, why = "20260101-000000-0000cafe", f"BLOCKED_MODEL_UNAVAILABLE: openai/{HOSTILE}: refused"
    store = LocalStore(tmp_path / "store")
    plan = RunPlan(run_id=run_id, bundles=(), models=("openai/m",), judges=("openai/j",), shards=())
    put_manifest(store, RunManifest(plan=plan, snapshots={}))
    put_run_end(store, RunEnd(run_id=run_id, how="blocked", reason=why))
    output = invoke("status", run_id, "--json", "--store", str(tmp_path / "store"))
    assert "\x9b" not in output and "\\u009b2J" in output, output
    assert json.loads(output)["end"]["reason"] == why


def test_a_corpus_or_trigger_key_in_a_bad_corpus_path_is_shown_escaped(repo: Path) -> None:
    corpus = repo / "evals" / "commit-message.evals.json"
    data = json.loads(corpus.read_text())
    data["evals"][0][HOSTILE] = 1
    corpus.write_text(json.dumps(data))
    output = invoke("validate", "--all-evals", "--repo", str(repo))
    assert "BLOCKED_BAD_CORPUS: evals/commit-message.evals.json: $.evals[0]: unexpected key \\x1b]0;" in output
    assert_inert(output)
    deep: object = 1
    for _ in range(40):  # nested too deep: the path to the fault names the hostile key
        deep = {"d": deep}
    triggers = [{"query": "write the changelog entry for this fix", "should_trigger": True, "x": {HOSTILE: deep}}]
    (repo / "evals" / "changelog-entry.triggers.json").write_text(json.dumps(triggers))
    corpus.write_text(json.dumps({**data, "evals": [{k: v for k, v in data["evals"][0].items() if k != HOSTILE}]}))
    output = invoke("validate", "--all-evals", "--repo", str(repo))
    assert "BLOCKED_BAD_CORPUS: evals/changelog-entry.triggers.json: $[0].x.\\x1b]0;pwned-title" in output
    assert_inert(output)


def test_a_folder_named_by_the_caller_is_shown_escaped_in_its_config_error(repo: Path, tmp_path: Path) -> None:
    output = invoke("grade", "--trajectories", str(tmp_path / HOSTILE), "--repo", str(repo), "--judge", "openai/j")
    assert output.startswith("CONFIG_ERROR: ") and output.count("\n") == 1
    assert_inert(output)


def test_a_model_name_in_the_status_usage_table_is_shown_escaped(repo: Path, tmp_path: Path) -> None:
    """The usage table is a Rich table: the console escapes what its cells render, line breaks too."""
    from engine.records import put_manifest
    from engine.redis_server import RedisServer
    from engine.state import RunState
    from engine.store import open_store
    from engine.usage import record_usage
    from producer.corpus.repo import Repo
    from producer.launch.submit import build_manifest
    from producer.plan.planning import new_run_id, plan_run
    from schemas.manifest import RunSettings

    loaded = Repo(repo)
    bundles = [o.bundle for o in loaded.load_many(loaded.targets([], True)) if o.bundle]
    plan = plan_run(new_run_id(), bundles, ["openai/m"], judges=["openai/j"])
    store = open_store(str(tmp_path / "store"))
    manifest = build_manifest(plan, repo, store, RunSettings(), out_dir=str(tmp_path / "out"), skipped=[])
    key = put_manifest(store, manifest)
    with RedisServer(workdir=tmp_path / "redis") as server:
        broker = redis.Redis.from_url(server.url)
        RunState(broker).register(plan.run_id, [s.shard_id for s in plan.shards], key, "2026-01-01T00:00:00Z")
        record_usage(broker, f"openai/{HOSTILE}", plan.run_id, calls=1, prompt_tokens=10)
        output = invoke("status", plan.run_id, "--store", str(tmp_path / "store"), "--broker", server.url)
    assert "openai/\\x1b]0;pwned-title" in output  # wide enough for the whole name on one line
    assert_inert(output)


# --- a graded run of hostile recordings: warnings, the COMPLETE block, status and report ------
SKILL = "replayed"


def _recording(case_id: int, model: str) -> str:
    events: list[Event] = [
        ToolCallEvent(call_id="c1", name="shell", arguments={"command": "echo MARK-ONE"}),
        ToolResultEvent(call_id="c1", output="done\n", exit_code=0),
        AssistantEvent(text="Finished."),
    ]
    return Trajectory(skill=SKILL, case_id=case_id, model=model, events=events).model_dump_json()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with (
        OfflineModelServer(scenario([], [ran("MARK-ONE")])) as server,
        checked_env(tmp_path / "e2e", server.base_url) as e,
    ):
        yield e


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_recorded_file_and_model_names_are_shown_escaped_by_grade_status_and_report(tmp_path: Path, env: Env) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, SKILL, [case(n, f"Run step {n}.", ["runs the shell command echo MARK-ONE"]) for n in (1, 2)])
    git_init(repo)
    recorded = tmp_path / "recorded" / SKILL
    recorded.mkdir(parents=True)
    (recorded / "case-1.json").write_text(_recording(1, f"openai/{HOSTILE}"))
    (recorded / "case-2.json").write_text(_recording(2, "recorded-exec"))
    (recorded / "\x1b[2J\x1b[Hcleared.txt").write_text("")
    (recorded / f"a\n{FORGED}\x1b[2K.txt").write_text("")

    graded = env.cli(
        "grade",
        "--trajectories",
        str(tmp_path / "recorded"),
        "--repo",
        str(repo),
        "--judge",
        "openai/judge",
        "--api-base",
        env.api_base,
        *env.place_args(),
    )
    assert graded.code == 0, graded.stdout + graded.stderr
    assert "warning: replayed/\\x1b[2J\\x1b[Hcleared.txt: ignored" in graded.stderr
    assert "leaderboard (composite): " in graded.stdout
    assert_inert(graded.stdout + graded.stderr)
    run_id = graded.run_id
    status = env.cli("status", run_id, "--store", str(env.store))
    assert status.code == 0, status.stdout + status.stderr
    assert "\x1b" not in status.stdout + status.stderr and FORGED not in status.stdout.splitlines()
    report = env.cli("report", run_id, "--store", str(env.store), "--out", str(tmp_path / "again"))
    assert report.code == 0 and "leaderboard (composite): " in report.stdout
    assert_inert(report.stdout + report.stderr)
