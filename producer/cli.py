"""The ``skill-eval`` command line. Thin: parses flags, calls the producer, prints, exits.

Exit codes are the verdict's: 0 PASS, 1 FAIL, 2 BLOCKED (any named guard, bad flags),
3 WARN (DESIGN.md §7, schemas.status.ExitCode).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from producer.planning import new_run_id, plan_run, plan_summary
from producer.repo import Repo
from schemas.errors import SkillEvalError
from schemas.export import json_schemas
from schemas.status import ExitCode

app = typer.Typer(
    name="skill-eval",
    help="Does this agent skill's text make a coding agent behave the way it promises?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

RepoOpt = Annotated[
    Path, typer.Option("--repo", help="Skill repo (a local checkout).", show_default="current directory")
]
AllEvalsOpt = Annotated[bool, typer.Option("--all-evals", help="Every evals/*.evals.json corpus.")]


def fail(exc: SkillEvalError, code: int = ExitCode.BLOCKED) -> typer.Exit:
    """Print a named error on stderr and return the Exit to raise."""
    err.print(str(exc), markup=False, highlight=False)
    return typer.Exit(code)


def _need_targets(skills: list[str], all_evals: bool) -> None:
    if not skills and not all_evals:
        err.print("Name a skill to evaluate, or pass --all-evals (skill-eval never defaults to all).")
        raise typer.Exit(ExitCode.BLOCKED)


@app.command()
def validate(
    skills: Annotated[list[str] | None, typer.Argument(help="Skill names.", show_default=False)] = None,
    all_evals: AllEvalsOpt = False,
    repo: RepoOpt = Path("."),
) -> None:
    """Validate corpora against schema v1: one line per corpus, exit 0 when all are valid, else 2."""
    skills = skills or []
    _need_targets(skills, all_evals)
    r = Repo(repo)
    try:
        files = r.targets(skills, all_evals)
    except SkillEvalError as exc:
        raise fail(exc) from exc
    bad = 0
    for outcome in r.load_many(files):
        if outcome.bundle:
            c = outcome.bundle.corpus
            out.print(
                f"OK {outcome.corpus_file}: {len(c.evals)} cases, {c.assertion_count} assertions",
                markup=False,
                highlight=False,
            )
        else:
            bad += 1
            out.print(str(outcome.error), markup=False, highlight=False)
    if not files:
        out.print(f"no corpora found under {r.root}/evals/")
    raise typer.Exit(ExitCode.BLOCKED if bad else ExitCode.PASS)


@app.command()
def run(
    skills: Annotated[list[str] | None, typer.Argument(help="Skill names.", show_default=False)] = None,
    all_evals: AllEvalsOpt = False,
    repo: RepoOpt = Path("."),
    model: Annotated[list[str] | None, typer.Option("--model", help="Executor model (repeatable).")] = None,
    judge: Annotated[list[str] | None, typer.Option("--judge", help="Judge model (repeatable).")] = None,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Repetitions per case and model.")] = 1,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate and print the plan; enqueue nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as one JSON object.")] = False,
) -> None:
    """Plan (and, without --dry-run, execute) an evaluation run."""
    skills = skills or []
    _need_targets(skills, all_evals)
    r = Repo(repo)
    try:
        files = r.targets(skills, all_evals)
    except SkillEvalError as exc:
        raise fail(exc) from exc
    outcomes = r.load_many(files)
    skipped = [o for o in outcomes if o.error]
    if skipped and not all_evals:
        raise fail(skipped[0].error)  # type: ignore[arg-type]
    bundles = [o.bundle for o in outcomes if o.bundle]
    models = model or ["(unspecified)"]
    plan = plan_run(new_run_id(), bundles, models, judges=judge or [], epochs=epochs)
    if not dry_run:
        err.print("Executing runs arrives with the pipeline (issue 6); use --dry-run to see the plan.")
        raise typer.Exit(ExitCode.BLOCKED)
    summary = plan_summary(plan)
    summary["skipped"] = [{"corpus": o.corpus_file, "error": str(o.error)} for o in skipped]
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        _print_plan(summary)
    raise typer.Exit(ExitCode.BLOCKED if skipped else ExitCode.PASS)


def _print_plan(summary: dict) -> None:  # type: ignore[type-arg]
    table = Table(title=f"Plan {summary['run_id']} (dry run: nothing enqueued)")
    for col in ("skill", "corpus", "cases", "assertions", "shards"):
        table.add_column(col, justify="right" if col in {"cases", "assertions", "shards"} else "left")
    for c in summary["corpora"]:
        table.add_row(c["skill"], c["corpus"], str(c["cases"]), str(c["assertions"]), str(c["shards"]))
    totals = summary["totals"]
    table.add_row("total", "", str(totals["cases"]), str(totals["assertions"]), str(totals["shards"]))
    out.print(table)
    out.print(
        f"models: {', '.join(summary['models'])}  epochs: {summary['epochs']}  "
        f"shards = cases x models x epochs = {totals['shards']}",
        markup=False,
        highlight=False,
    )
    for s in summary["skipped"]:
        out.print(f"skipped {s['corpus']}: {s['error']}", markup=False, highlight=False)


@app.command()
def schema(
    name: Annotated[
        str | None, typer.Argument(help="One schema: corpus, shard, run-plan, trajectory, shard-grade.")
    ] = None,
) -> None:
    """Print the JSON Schema of the data skill-eval reads and writes."""
    schemas = json_schemas()
    if name is not None:
        if name not in schemas:
            err.print(f"CONFIG_ERROR: unknown schema {name!r}; one of {', '.join(schemas)}")
            raise typer.Exit(ExitCode.BLOCKED)
        schemas = {name: schemas[name]}
    sys.stdout.write(json.dumps(schemas if name is None else schemas[name], indent=2) + "\n")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
