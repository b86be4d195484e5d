"""The command line of trigger evaluation: ``run --triggers`` options, its dry run, and ``validate``'s lines."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harnesses.registry import trigger_executors
from producer.corpus.repo import Repo
from producer.corpus.triggers import (
    catalogue_chars,
    estimate,
    installed_skills,
    load_trigger_bundles,
    plan_json,
    plan_lines,
    trigger_file,
    trigger_targets,
)
from producer.plan.planning import harness_pairs, new_run_id, plan_run
from schemas.constants import SKILL_NAME_RE
from schemas.errors import ConfigError
from schemas.status import ExitCode
from schemas.triggers import DEFAULT_TRIGGER_TURNS, TriggerSettings
from schemas.visible import visible
from schemas.words import plural

PANEL = "Trigger evaluation"
TriggersOpt = Annotated[
    bool,
    typer.Option(
        "--triggers",
        help="Run the trigger corpora (evals/<skill>.triggers.json): does the skill fire when it should?",
        rich_help_panel=PANEL,
    ),
]
TriggerTurnsOpt = Annotated[
    int,
    typer.Option(
        "--trigger-turns",
        min=1,
        max=50,
        help="Model turns per trigger query without an activation.",
        rich_help_panel=PANEL,
    ),
]
MinRecallOpt = Annotated[
    float | None,
    typer.Option(
        "--min-recall", min=0.0, max=1.0, help="FAIL when a skill's recall is below this.", rich_help_panel=PANEL
    ),
]
MaxFalseTriggerOpt = Annotated[
    float | None,
    typer.Option(
        "--max-false-trigger",
        min=0.0,
        max=1.0,
        help="FAIL when a skill's false-trigger rate is above this.",
        rich_help_panel=PANEL,
    ),
]
DEFAULT_TURNS = DEFAULT_TRIGGER_TURNS


def trigger_settings(
    triggers: bool,
    turns: int,
    min_recall: float | None,
    max_false_trigger: float | None,
    executors: Sequence[str],
    behavioural_flags: dict[str, object] | None = None,
) -> TriggerSettings | None:
    """The run's trigger settings, or None for a behavioural run (whose trigger gates are refused).

    ``behavioural_flags`` (option -> value) are the behavioural run's arms and gates: a trigger run
    has no assertions for them to act on, so any that is set is refused rather than ignored.
    ``executors``: every ``--executor`` given; each must record what fired.
    """
    given = [flag for flag, value in (behavioural_flags or {}).items() if value not in (None, False)]
    if triggers and given:
        raise ConfigError(
            f"--triggers: {', '.join(given)} {'acts' if len(given) == 1 else 'act'} on a behavioural run; "
            "a trigger run gates with "
            "--min-recall and --max-false-trigger"
        )
    if not triggers:
        if min_recall is not None or max_false_trigger is not None:
            raise ConfigError("--min-recall and --max-false-trigger gate a trigger run: add --triggers")
        return None
    able = trigger_executors()
    unable = [e for e in executors if e not in able]
    if unable:
        raise ConfigError(
            f"--triggers: activation is recorded for {', '.join(able[:-1])} and {able[-1]}, not {unable[0]!r}"
        )
    return TriggerSettings(turns=turns, min_recall=min_recall, max_false_trigger=max_false_trigger)


def trigger_dry_run(
    skills: list[str],
    all_evals: bool,
    repo_dir: Path,
    models: list[str],
    epochs: int,
    turns: int,
    out: Console,
    as_json: bool = False,
    harnesses: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Validate the trigger corpora, print the plan and its cost estimate; exit like the run would start.
    ``harnesses``: a sweep's harness × model pairs (each pair asks every query)."""
    repo = Repo(repo_dir)
    outcomes = load_trigger_bundles(repo, trigger_targets(repo, skills, all_evals))
    errors = [o.error for o in outcomes if o.error]
    if errors and not all_evals:
        raise errors[0]
    bundles = [o.bundle for o in outcomes if o.bundle]
    plan = plan_run(new_run_id(), bundles, models, epochs=epochs, harnesses=harnesses)
    found = estimate(plan, turns, catalogue_chars(repo))
    installed = len(installed_skills(repo))
    pairs = harness_pairs(plan)
    if as_json:
        doc = plan_json(plan, turns, found, installed, pairs) | {"skipped": [str(e) for e in errors]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        for line in plan_lines(plan, turns, found, installed, pairs):
            out.print(line, markup=False, highlight=False)
        for e in errors:
            out.print(f"skipped: {e}", markup=False, highlight=False)
    sys.stdout.flush()
    raise typer.Exit((ExitCode.WARN if bundles else ExitCode.BLOCKED) if errors else ExitCode.PASS)


def behavioural_targets(repo: Repo, skills: list[str], all_evals: bool) -> list[str]:
    """The behavioural corpora ``validate`` checks beside the trigger ones: a skill (or a repo, with
    --all-evals) that has only trigger corpora is not missing one."""
    if all_evals:
        repo.require_evals()
        if not repo.all_corpus_files() and _trigger_files(repo):
            return []
        return repo.targets([], True)
    return repo.targets(without_trigger_only(repo, skills), False)


def _trigger_files(repo: Repo) -> list[str]:
    folder = repo.inside("evals")
    return sorted(f"evals/{p.name}" for p in folder.glob("*.triggers.json")) if folder is not None else []


def without_trigger_only(repo: Repo, skills: list[str]) -> list[str]:
    """The named skills less those with a trigger corpus and no behavioural one (``validate`` checks
    what a skill has)."""
    # A name that is not kebab-case goes on to the corpus check, which names the error.
    return [
        s
        for s in skills
        if not SKILL_NAME_RE.match(s)
        or not (repo.inside(trigger_file(s)) is not None and not repo.has_file(repo.corpus_path(s)))
    ]


@dataclass(frozen=True)
class Checked:
    files: int
    bad: int


def validate_trigger_corpora(repo: Repo, skills: list[str], all_evals: bool, out: Console) -> Checked:
    """``validate``: one line per trigger corpus (named skills: those that have one)."""
    if all_evals:
        files = _trigger_files(repo)
    else:
        files = [trigger_file(s) for s in skills if SKILL_NAME_RE.match(s) and repo.inside(trigger_file(s)) is not None]
    bad = 0
    for o in load_trigger_bundles(repo, files):
        if o.bundle and o.bundle.triggers:
            pos = sum(t.should_trigger for t in o.bundle.triggers.triggers)
            total = len(o.bundle.triggers.triggers)
            line = visible(f"OK {o.corpus_file}: {plural(total, 'query')} ({pos} positive, {total - pos} negative)")
        else:
            bad += 1
            line = str(o.error)
        out.print(line, markup=False, highlight=False)
    return Checked(len(files), bad)
