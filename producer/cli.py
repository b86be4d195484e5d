"""The ``skill-eval`` command line. Thin: parses flags, calls the producer, prints, exits.

Exit codes are the verdict's: 0 PASS, 1 FAIL, 2 BLOCKED (any named guard, bad flags),
3 WARN (DESIGN.md §7, schemas.status.ExitCode).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from rich.console import Console
from rich.table import Table

from engine.settings import Settings
from producer.cli_stats import (
    BaselineOpt,
    RegressionAlphaOpt,
    RequireUpliftOpt,
    check_arms,
    fill_optional_values,
    register_commands,
)
from producer.embedded import worker_command
from producer.planning import arm_variants, new_run_id, plan_run, plan_summary
from producer.repo import Repo
from producer.runner import RunRequest, grade_recorded, requeue_failed, rereport, run_evaluation, run_status
from schemas.constants import ALL_QUEUES, DEFAULT_REPORT_DIR
from schemas.errors import SkillEvalError
from schemas.export import json_schemas
from schemas.manifest import AgentBudget, RunSettings
from schemas.model_config import load_model_config
from schemas.report import RunResult
from schemas.status import ExitCode, SandboxMode
from worker.sandbox import require_sandbox

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
JudgeOpt = Annotated[list[str] | None, typer.Option("--judge", help="Judge model (repeatable: an ensemble).")]
OutOpt = Annotated[Path, typer.Option("--out", help="Report folder.")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Model config TOML (default ./skill-eval.toml).")]
ApiBaseOpt = Annotated[str | None, typer.Option("--api-base", help="API base URL for every model of the run.")]
WorkersOpt = Annotated[int, typer.Option("--workers", min=1, help="Embedded cluster: worker processes.")]
BrokerOpt = Annotated[str | None, typer.Option("--broker", help="Redis URL of a cluster (env SKILL_EVAL_BROKER_URL).")]
StoreOpt = Annotated[
    str | None, typer.Option("--store", help="Artifact store: folder or s3://... (env SKILL_EVAL_STORE).")
]
SandboxOpt = Annotated[
    SandboxMode | None, typer.Option("--sandbox", help="bwrap (default) or none (explicit opt-out).")
]
StrictEvidenceOpt = Annotated[
    bool, typer.Option("--strict-evidence", help="A pass whose quote is not in the transcript fails.")
]
NoCalibrationOpt = Annotated[bool, typer.Option("--no-calibration", help="Skip judge calibration (reported).")]
FailUnderOpt = Annotated[
    float | None, typer.Option("--fail-under", min=0.0, max=1.0, help="FAIL below this pass rate (0-1).")
]
DetachOpt = Annotated[bool, typer.Option("--detach", help="With --broker: submit, print the run id, return.")]


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
    model: Annotated[
        list[str] | None, typer.Option("--model", help="Executor model, a litellm name (repeatable).")
    ] = None,
    judge: JudgeOpt = None,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Repetitions per case and model.")] = 1,
    out_dir: OutOpt = Path(DEFAULT_REPORT_DIR),
    config: ConfigOpt = None,
    api_base: ApiBaseOpt = None,
    workers: WorkersOpt = 2,
    broker: BrokerOpt = None,
    store: StoreOpt = None,
    sandbox: SandboxOpt = None,
    executor: Annotated[str, typer.Option("--executor", help="agent, or cmd:'<agent CLI command line>'.")] = "agent",
    compare: Annotated[str | None, typer.Option("--compare", help="Also grade the skill as at this git ref.")] = None,
    baseline: BaselineOpt = None,
    require_uplift: RequireUpliftOpt = None,
    regression_alpha: RegressionAlphaOpt = None,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Executor turns per shard.")] = 40,
    shard_timeout: Annotated[
        float, typer.Option("--shard-timeout", help="Executor wall clock per shard, seconds.")
    ] = 900.0,
    strict_evidence: StrictEvidenceOpt = False,
    no_calibration: NoCalibrationOpt = False,
    fail_under: FailUnderOpt = None,
    detach: DetachOpt = False,
    force: Annotated[
        bool, typer.Option("--force", help="--all-evals: re-run corpora that already have a report.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and print the plan; enqueue nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --dry-run: print the plan as one JSON object.")] = False,
) -> None:
    """Evaluate skills: plan, shard onto the queues, execute, grade, reduce, report. Exit code is the verdict's."""
    skills = skills or []
    _need_targets(skills, all_evals)
    try:
        check_arms(baseline, require_uplift, regression_alpha, compare)
    except SkillEvalError as exc:
        raise fail(exc) from exc
    if dry_run:
        variants = arm_variants(compare, baseline)
        _dry_run(skills, all_evals, repo, model or ["(unspecified)"], judge or [], epochs, as_json, variants)
        return
    if not model or not judge:
        err.print("CONFIG_ERROR: --model and --judge are required (litellm model names; see README).")
        raise typer.Exit(ExitCode.BLOCKED)
    try:
        settings = _settings(broker_url=broker, store=store, sandbox=sandbox)
        if settings.sandbox is SandboxMode.BWRAP and not settings.broker_url and not dry_run:
            require_sandbox(SandboxMode.BWRAP)  # embedded run: this host executes; cluster workers check their own
        models_config = load_model_config(config, api_base)
        req = RunRequest(
            skills=skills,
            all_evals=all_evals,
            repo=repo,
            models=model,
            judges=judge,
            epochs=epochs,
            out=out_dir,
            workers=workers,
            detach=detach,
            force=force,
            show_progress=sys.stderr.isatty(),
            compare=compare,
            baseline=baseline,
            settings=RunSettings(
                budget=AgentBudget(max_turns=max_turns, wall_clock_s=shard_timeout),
                executor=executor,
                strict_evidence=strict_evidence,
                calibrate=not no_calibration,
                fail_under=fail_under,
                regression_alpha=regression_alpha,
                require_uplift=require_uplift,
                models=models_config.model_dump(mode="json"),
            ),
        )
        outcome = run_evaluation(req, settings, out, err)
    except SkillEvalError as exc:
        raise fail(exc) from exc
    conclude(outcome)


def conclude(outcome: RunResult | str) -> None:
    """Exit with the verdict's code, or print the run id alone when detached."""
    if isinstance(outcome, str):
        sys.stdout.write(outcome + "\n")
        raise typer.Exit(ExitCode.PASS)
    raise typer.Exit(outcome.verdict.exit_code)


def _settings(**overrides: Any) -> Settings:
    """Settings from env (SKILL_EVAL_*) with flags given on the command line taking precedence."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


def _dry_run(
    skills: list[str],
    all_evals: bool,
    repo: Path,
    models: list[str],
    judges: list[str],
    epochs: int,
    as_json: bool,
    variants: list[str] | None = None,
) -> None:
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
    plan = plan_run(new_run_id(), bundles, models, judges=judges, epochs=epochs, variants=variants or ["current"])
    summary = plan_summary(plan)
    summary["skipped"] = [{"corpus": o.corpus_file, "error": str(o.error)} for o in skipped]
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        _print_plan(summary)
    # The real run goes on past a bad corpus with --all-evals and WARNs; the dry run says the same.
    raise typer.Exit((ExitCode.WARN if bundles else ExitCode.BLOCKED) if skipped else ExitCode.PASS)


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
        + (
            f"arms: {', '.join(summary['variants'])}  shards = cases x models x epochs x arms = {totals['shards']}"
            if len(summary["variants"]) > 1
            else f"shards = cases x models x epochs = {totals['shards']}"
        ),
        markup=False,
        highlight=False,
    )
    for s in summary["skipped"]:
        out.print(f"skipped {s['corpus']}: {s['error']}", markup=False, highlight=False)
    for line in summary["power"]:
        out.print(line, markup=False, highlight=False)


@app.command()
def grade(
    skills: Annotated[list[str] | None, typer.Argument(help="Skill names (default: every skill recorded).")] = None,
    trajectories: Annotated[
        str, typer.Option("--trajectories", help="Folder or s3://bucket/prefix of recordings.")
    ] = "",
    repo: RepoOpt = Path("."),
    judge: JudgeOpt = None,
    out_dir: OutOpt = Path(DEFAULT_REPORT_DIR),
    config: ConfigOpt = None,
    api_base: ApiBaseOpt = None,
    workers: WorkersOpt = 2,
    broker: BrokerOpt = None,
    store: StoreOpt = None,
    strict_evidence: StrictEvidenceOpt = False,
    no_calibration: NoCalibrationOpt = False,
    fail_under: FailUnderOpt = None,
    detach: DetachOpt = False,
) -> None:
    """Grade recorded trajectories (own JSON or Claude Code stream-json) against the corpora; no execution.

    Layout: <root>/<skill>/case-<id>[.epoch-<n>].json|.jsonl
    """
    if not trajectories or not judge:
        err.print("CONFIG_ERROR: --trajectories and --judge are required")
        raise typer.Exit(ExitCode.BLOCKED)
    try:
        settings = _settings(broker_url=broker, store=store)
        models_config = load_model_config(config, api_base)
        req = RunRequest(
            skills=skills or [],
            all_evals=False,
            repo=repo,
            models=[],
            judges=judge,
            out=out_dir,
            workers=workers,
            detach=detach,
            show_progress=sys.stderr.isatty(),
            settings=RunSettings(
                strict_evidence=strict_evidence,
                calibrate=not no_calibration,
                fail_under=fail_under,
                models=models_config.model_dump(mode="json"),
            ),
        )
        outcome = grade_recorded(req, trajectories, settings, out, err)
    except SkillEvalError as exc:
        raise fail(exc) from exc
    conclude(outcome)


@app.command()
def worker(
    queues: Annotated[str, typer.Option("--queues", help="Comma-separated queues to consume.")] = ",".join(ALL_QUEUES),
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Worker processes.")] = 2,
    broker: BrokerOpt = None,
    store: StoreOpt = None,
    sandbox: SandboxOpt = None,
    loglevel: Annotated[str, typer.Option("--loglevel", help="Celery log level.")] = "INFO",
) -> None:
    """Start a worker for a cluster (execute, grade and reduce queues by default)."""
    settings = _settings(broker_url=broker, store=store, sandbox=sandbox)
    if not settings.broker_url:
        err.print("CONFIG_ERROR: a worker needs --broker or SKILL_EVAL_BROKER_URL")
        raise typer.Exit(ExitCode.BLOCKED)
    unknown = set(queues.split(",")) - set(ALL_QUEUES)
    if unknown:
        err.print(f"CONFIG_ERROR: unknown queue(s) {', '.join(sorted(unknown))}; known: {', '.join(ALL_QUEUES)}")
        raise typer.Exit(ExitCode.BLOCKED)
    env = {
        **os.environ,
        "SKILL_EVAL_BROKER_URL": settings.broker_url,
        "SKILL_EVAL_STORE": settings.store,
        "SKILL_EVAL_SANDBOX": settings.sandbox.value,
    }
    cmd = worker_command(queues, concurrency, f"skill-eval-{os.getpid()}@%h", loglevel)
    os.execvpe(cmd[0], cmd, env)


@app.command()
def status(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    broker: BrokerOpt = None,
    store: StoreOpt = None,
) -> None:
    """Shard counts by state, whether the run is done, and per-model usage."""
    settings = _settings(broker_url=broker, store=store)
    try:
        doc = run_status(run_id, settings)
    except SkillEvalError as exc:
        raise fail(exc) from exc
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    out.print(f"run {run_id}: {'done' if doc['done'] else 'running'} ({doc['source']})", markup=False)
    for state, n in doc["states"].items():
        if n:
            out.print(f"  {state}: {n}", markup=False)
    out.print(f"  total: {doc['total']}", markup=False)
    for model, u in doc["usage"].items():
        out.print(f"  {model}: {u}", markup=False, highlight=False)


@app.command()
def report(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    out_dir: Annotated[Path | None, typer.Option("--out", help="Report folder (default: the run's).")] = None,
    store: StoreOpt = None,
) -> None:
    """Reduce again from the stored verdicts and write the reports; exit code is the verdict's."""
    try:
        result = rereport(run_id, _settings(store=store), out_dir, out)
    except SkillEvalError as exc:
        raise fail(exc) from exc
    raise typer.Exit(result.verdict.exit_code)


@app.command()
def resubmit(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    broker: BrokerOpt = None,
    store: StoreOpt = None,
) -> None:
    """Re-run only the shards of a run that ended in an infra failure (cluster mode)."""
    settings = _settings(broker_url=broker, store=store)
    try:
        shards = requeue_failed(run_id, settings)
    except SkillEvalError as exc:
        raise fail(exc) from exc
    out.print(f"re-queued {len(shards)} shard(s) of run {run_id}", markup=False)


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


register_commands(app, out, err)


def main() -> None:
    """Entry point. An unexpected crash is the evaluator failing, never a verdict: it exits 2, not 1
    (which would read as a behavioural FAIL in CI)."""
    try:
        # Without standalone mode click *returns* the code of a typer.Exit instead of exiting.
        code = app(args=fill_optional_values(sys.argv[1:]), standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:  # usage errors: typer/click already formats them
        exc.show()
        sys.exit(ExitCode.BLOCKED)
    except Exception as exc:
        err.print(f"INFRA_ERROR: {type(exc).__name__}: {exc}", markup=False, highlight=False)
        sys.exit(ExitCode.BLOCKED)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
