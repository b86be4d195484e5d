"""What a person reads on the terminal: --version, --help without type noise, a status table."""

from __future__ import annotations

import io
import itertools
import json
import shlex
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import click
import pytest
import typer
from rich.console import Console

from producer.commands.cli import app
from producer.plan.dry_run import print_plan
from producer.results.status_view import status_view
from schemas.summary import CorpusPlan, PlanSummary, PlanTotals, RunStatus

EXE = Path(sys.executable).parent / "skill-eval"


def cli(*args: str, columns: int = 100) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": str(columns), "TERM": "dumb", "NO_COLOR": "1"}
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=60, env=env)


def test_version_prints_the_installed_version() -> None:
    result = cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"skill-eval {version('skill-eval')}"


@pytest.mark.parametrize("command", ["run", "grade", "validate", "status", "resubmit", "worker"])
def test_help_shows_no_python_types(command: str) -> None:
    result = cli(command, "--help")
    assert result.returncode == 0, result.stderr
    for noise in ("<bool>", "<str>", "<list[str]>", "<int", "<float", "<path>"):
        assert noise not in result.stdout, (noise, result.stdout)


def _commands() -> list[str]:
    group = typer.main.get_command(app)
    return sorted(group.list_commands(click.Context(group)))  # type: ignore[attr-defined]


HELP_COLUMNS = 100


@pytest.mark.parametrize("command", _commands())
def test_help_folds_each_paragraph_of_a_commands_text_at_the_width_never_at_its_source_line_breaks(
    command: str,
) -> None:
    """A line of the help text ends only where the next word would not fit (one column of
    padding each side): a docstring's own line breaks are not the terminal's."""
    result = cli(command, "--help", columns=HELP_COLUMNS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Usage:")) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("╭"))
    paragraphs = "\n".join(line.strip() for line in lines[start:end]).strip().split("\n\n")
    assert paragraphs[0], result.stdout  # the command says what it does
    for paragraph in paragraphs:
        shown = paragraph.split("\n")
        for line, following in itertools.pairwise(shown):
            assert len(line) + 1 + len(following.split()[0]) > HELP_COLUMNS - 2, (line, following)


def test_run_help_marks_the_required_options_and_names_values() -> None:
    text = cli("run", "--help", columns=200).stdout
    # An option with an alias is listed as ``--epochs,--runs``: keyed by its first name.
    lines = {line.split()[1].split(",")[0]: line for line in text.splitlines() if line.startswith("│ --")}
    assert "MODEL" in lines["--model"] and "[required, except with --dry-run]" in lines["--model"]
    assert "JUDGE" in lines["--judge"] and "[required, except with --dry-run]" in lines["--judge"]
    assert "bwrap|none" in lines["--sandbox"]
    assert "API-BASE" in lines["--api-base"]
    assert "[required" not in lines["--epochs"] and "--runs" in lines["--epochs"]


def test_grade_help_marks_its_required_options() -> None:
    text = cli("grade", "--help", columns=200).stdout
    lines = {line.split()[1]: line for line in text.splitlines() if line.startswith("│ --")}
    assert "[required]" in lines["--trajectories"] and "[required]" in lines["--judge"]


STATUS = RunStatus(
    run_id="20261204-220548-359ade84",
    source="store",
    total=40,
    states={"queued": 0, "executing": 0, "graded": 37, "executor-failed": 2, "blocked": 1},
    done=True,
    terminal=40,
    usage={
        "openai/gpt-4.1": {
            "calls": 1234,
            "errors": 12,
            "failed": 2,
            "prompt_tokens": 2_500_000,
            "completion_tokens": 81_000,
            "cost_usd": 5.5,
        },
        "openai/judge": {"calls": 40, "prompt_tokens": 90_000, "completion_tokens": 4000, "cost_usd": None},
    },
)


def rendered(width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(status_view(STATUS))
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", [80, 120])
def test_status_is_a_table_a_person_reads(width: int) -> None:
    lines = rendered(width)
    text = "\n".join(lines)
    assert all(len(line) <= width for line in lines)
    assert lines[0] == "run 20261204-220548-359ade84: done (from the store); 40 of 40 shards finished"
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:] if line.strip()}
    assert rows["graded"] == ["37"] and rows["executor-failed"] == ["2"] and rows["blocked"] == ["1"]
    assert rows["total"] == ["40"]
    assert "queued" not in rows  # a state with no shard is left out
    assert rows["model"] == ["calls", "errors", "failed", "tokens", "in", "tokens", "out", "cost"]
    assert rows["openai/gpt-4.1"] == ["1,234", "12", "2", "2,500,000", "81,000", "$5.5000"]
    assert rows["openai/judge"] == ["40", "0", "0", "90,000", "4,000", "unknown"]
    assert "{" not in text and "'calls'" not in text  # no Python dict printed


def test_status_from_the_store_alone_names_no_state_it_cannot_know_and_keeps_prose_lines_whole(
    tmp_path: Path,
) -> None:
    from engine.records import put_manifest
    from engine.store import LocalStore
    from schemas.manifest import RunManifest
    from tests.test_reducer import bundle, plan_for

    plan = plan_for([bundle("s", (2, 2))])
    put_manifest(LocalStore(tmp_path / "store"), RunManifest(plan=plan, snapshots={}))
    # Not a terminal: a pipe, as a script or a log reads it.
    result = cli("status", plan.run_id, "--store", str(tmp_path / "store"), columns=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    rows = {line.split()[0]: line for line in lines[1:] if line.strip()}
    # Queued or executing: the store holds no record of either, so it names neither.
    assert "queued" not in rows and "executing" not in rows
    assert rows["not"].split() == ["not", "ended", "(queued", "or", "running)", "2"]
    # A sentence stays one line, however narrow the width a pipe is given.
    assert "whether it is still going only its broker knows (--broker, or SKILL_EVAL_BROKER_URL)" in lines
    assert lines[0] == f"run {plan.run_id}: not done (from the store); 0 of 2 shards finished"


def test_status_json_keeps_its_shape() -> None:
    doc = json.loads(STATUS.model_dump_json())
    # The fields scripts read stay; the delivery fields (waiting, stall) were added beside them.
    assert {"version", "run_id", "source", "total", "states", "done", "terminal", "usage"} <= set(doc)
    assert {"waiting", "waiting_oldest_s", "in_flight", "stalled"} <= set(doc)


def test_the_demo_echoes_a_command_a_user_can_copy(tmp_path: Path) -> None:
    from producer.commands.demo import ROOT, copyable

    args = ["run", "--all-evals", "--repo", str(tmp_path / "demo repo"), "--model", "openai/m"]
    line = copyable(args)
    assert "producer.commands.cli" not in line and "python" not in line
    argv = shlex.split(line)
    assert argv[1:] == args  # quoted so that a shell gives back the very arguments
    program = Path(argv[0]) if Path(argv[0]).is_absolute() or argv[0] == "skill-eval" else ROOT / argv[0]
    copied = subprocess.run(
        [str(program), "--version"], capture_output=True, text=True, timeout=60, cwd=ROOT, env={"PATH": "/usr/bin:/bin"}
    )
    assert copied.returncode == 0 and copied.stdout.startswith("skill-eval "), copied.stderr


def test_the_status_command_prints_the_table_and_json_for_machines(example_repo: Path, tmp_path: Path) -> None:
    """A run submitted to a folder store and not yet executed: every shard not ended (the store
    cannot tell queued from executing)."""
    from engine.records import put_manifest
    from engine.store import open_store
    from producer.corpus.repo import Repo
    from producer.launch.submit import build_manifest
    from producer.plan.planning import new_run_id, plan_run
    from schemas.manifest import RunSettings

    repo = Repo(example_repo)
    bundles = [o.bundle for o in repo.load_many(repo.targets([], True)) if o.bundle]
    plan = plan_run(new_run_id(), bundles, ["openai/m"], judges=["openai/j"], epochs=2)
    store = open_store(str(tmp_path / "store"))
    put_manifest(
        store, build_manifest(plan, example_repo, store, RunSettings(), out_dir=str(tmp_path / "out"), skipped=[])
    )

    human = cli("status", plan.run_id, "--store", str(tmp_path / "store"), columns=80)
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    # From the store alone a run going on a fleet and one whose command was killed look alike.
    assert lines[0] == f"run {plan.run_id}: not done (from the store); 0 of 8 shards finished"
    assert "whether it is still going only its broker knows" in human.stdout
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:] if line.strip()}
    assert rows["not"] == ["ended", "(queued", "or", "running)", "8"] and rows["total"] == ["8"]
    assert "{" not in human.stdout

    machine = cli("status", plan.run_id, "--json", "--store", str(tmp_path / "store"))
    doc = json.loads(machine.stdout)
    assert doc["total"] == 8 and doc["not_ended"] == 8 and doc["states"]["queued"] == 0 and doc["done"] is False


def test_the_dry_run_table_shows_repo_names_as_text_never_as_console_markup() -> None:
    """A corpus path is the repo's: ``[/]`` in one would crash the table, ``[bold]`` would style it."""
    hostile = "evals/[bold]x[/].json"
    corpus = CorpusPlan(skill="x", corpus=hostile, bundle_key="x-0", cases=2, assertions=2, shards=2)
    totals = PlanTotals(corpora=1, cases=2, assertions=2, shards=2)
    summary = PlanSummary(
        run_id="r", corpora=[corpus], models=["m"], judges=["j"], epochs=1, variants=["current"], totals=totals
    )
    console = Console(record=True, width=200)
    print_plan(summary, console)
    assert hostile in console.export_text()


@pytest.mark.parametrize("width", [80, 100])
def test_status_keeps_a_long_model_name_on_one_line_at_80_columns(width: int) -> None:
    """A model name is read whole: at 80 columns it is never split mid-word across lines (the
    numeric columns' headers wrap instead)."""
    long_name, judge = "openai/scripted-demo-executor", "openai/scripted-demo-judge"
    usage = {
        long_name: {"calls": 8, "prompt_tokens": 78_199, "completion_tokens": 140, "cost_usd": 0.0991},
        judge: {"calls": 2, "prompt_tokens": 1_604, "completion_tokens": 309, "cost_usd": None},
    }
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(status_view(STATUS.model_copy(update={"usage": usage})))
    lines = console.export_text().splitlines()
    assert all(len(line) <= width for line in lines)
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.strip()}
    assert rows[long_name] == ["8", "0", "0", "78,199", "140", "$0.0991"]
    assert rows[judge] == ["2", "0", "0", "1,604", "309", "unknown"]


def test_status_breaks_a_model_name_too_long_for_its_column_at_its_separators() -> None:
    name = "openrouter/some-provider/a-very-long-model-name-that-goes-on-2025"
    usage = {name: {"calls": 8, "prompt_tokens": 78_199, "completion_tokens": 140, "cost_usd": None}}
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(status_view(STATUS.model_copy(update={"usage": usage})))
    lines = console.export_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("openrouter/"))
    parts = [line.split()[0] for line in lines[start:] if line.strip()]
    assert "".join(parts) == name
    assert all(part[-1] in "/-_." for part in parts[:-1]), parts  # every line ends at a separator
    assert lines[start].split()[1:] == ["8", "0", "0", "78,199", "140", "unknown"]


NAMES = ("openai/scripted-demo-executor", "openai/scripted-demo-executor-b", "openai/j", "openrouter/x/a-b_c.d-2025")


@pytest.mark.parametrize("width", [60, 72, 80, 120])
def test_status_never_cuts_a_number_and_breaks_a_model_name_only_at_its_separators(width: int) -> None:
    """Every digit of every figure is printed whatever the width; the model's name takes the width
    the figures leave, and a line of it ends only after a ``/``, ``-``, ``_`` or ``.``."""
    figures = {"calls": 18, "errors": 0, "failed": 0, "prompt_tokens": 14_612, "completion_tokens": 335}
    usage: dict[str, dict[str, int | float | None]] = {name: {**figures, "cost_usd": None} for name in NAMES}
    usage["openai/j"] = {**figures, "calls": 1_234, "prompt_tokens": 250_000, "cost_usd": 0.0991}
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(status_view(STATUS.model_copy(update={"usage": usage})), crop=False)
    lines = console.export_text().splitlines()
    assert all(len(line) <= width for line in lines), lines
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("model")) + 1 :]
    broken: list[tuple[list[str], list[str]]] = []  # each model's name, line by line, and its figures
    for line in table:
        words = line.split()
        if len(words) > 1:  # a model's first line: the start of its name and its figures
            broken.append(([words[0]], words[1:]))
        elif words:  # the rest of its name
            broken[-1][0].append(words[0])
    rows = {"".join(parts): figures for parts, figures in broken}
    expected = ["18", "0", "0", "14,612", "335", "unknown"]
    assert {name: rows[name] for name in NAMES if name != "openai/j"} == {n: expected for n in NAMES if n != "openai/j"}
    assert rows["openai/j"] == ["1,234", "0", "0", "250,000", "335", "$0.0991"]
    for parts, _ in broken:
        assert all(part[-1] in "/-_." for part in parts[:-1]), parts  # broken only at its separators
    if width >= 80:  # room for a 31-character name beside the figures: it stays whole
        assert any(line.split()[0] == "openai/scripted-demo-executor-b" for line in table if line.strip())
