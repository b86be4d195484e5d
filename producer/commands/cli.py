"""The ``skill-eval`` command line. Thin: parses flags, calls the producer, prints, exits.

Exit codes are the verdict's: 0 PASS, 1 FAIL, 2 BLOCKED (any named guard, bad flags, a usage
error, an infra crash), 3 WARN (schemas.status.ExitCode).

Errors take one path: a command raises the typed error (``ConfigError`` for bad flags, any
``SkillEvalError``), :class:`_Commands` prints it once as ``<STATUS>: <detail>`` and exits 2;
Click's own usage errors (an unknown command or option) print the usage line and the
``--help`` hint and exit 2; anything else is the evaluator crashing (:func:`main`).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from engine.labels import check_calibration_runs
from engine.node import WorkerNode
from engine.repo_source import fetch_repo, is_remote
from engine.settings import Settings
from engine.store import open_store
from harnesses.registry import check_executor
from producer.commands.stats import (
    BaselineOpt,
    RegressionAlphaOpt,
    RequireUpliftOpt,
    check_arms,
    fill_optional_values,
    register_commands,
)
from producer.commands.trigger_cli import (
    DEFAULT_TURNS,
    MaxFalseTriggerOpt,
    MinRecallOpt,
    TriggersOpt,
    TriggerTurnsOpt,
    behavioural_targets,
    trigger_dry_run,
    trigger_settings,
    validate_trigger_corpora,
)
from producer.corpus.repo import Repo
from producer.launch.evaluate import check_host_sandbox, run_evaluation
from producer.launch.fleet_checks import (
    check_shard_timeout,
    default_node_name,
    node_health,
    node_name_for_probe,
    remember_node,
)
from producer.launch.grade_only import grade_recorded
from producer.launch.resubmit import CHOICES, parse_only, resubmit_run
from producer.plan.dry_run import PlanInput, dry_run_plan
from producer.plan.planning import arm_variants
from producer.plan.prechecks import check_api_base, check_detach, check_invoke, check_repo_path, fixture_guards
from producer.plan.request import RunRequest
from producer.results.status_view import status_view
from producer.results.stored_run import rereport, run_status
from schemas.constants import ALL_QUEUES, DEFAULT_REPORT_DIR
from schemas.errors import ConfigError, SkillEvalError
from schemas.export import json_schemas
from schemas.manifest import AgentBudget, RunSettings
from schemas.model_config import ModelConfig, load_model_config
from schemas.report import RunResult
from schemas.status import ExitCode, SandboxMode
from viewer.cli import register_commands as register_viewer_commands


class _Commands(TyperGroup):
    """The one place a named error becomes its printed line and exit code 2."""

    def invoke(self, ctx: Any) -> Any:  # a click Context (typer vendors click: no public name for it)
        try:
            return super().invoke(ctx)
        except SkillEvalError as exc:
            err.print(str(exc), markup=False, highlight=False)
            raise typer.Exit(ExitCode.BLOCKED) from exc

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _plain_types(command, ctx)
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _plain_types(self, ctx)
        super().format_help(ctx, formatter)


def _plain_types(command: Any, ctx: Any) -> None:
    """``--help`` shows what to write, not Python's types (``<list[str]>``, ``<bool>``): a flag shows
    nothing, a value its option's name (``--model MODEL``), a choice its values (``bwrap|none``),
    an argument its name alone."""
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            param.display_type_rich = lambda ctx: None
        elif param.metavar is not None:
            continue
        elif param.is_flag:
            param.metavar = ""
        elif not param.type_descriptor.is_choice:
            param.metavar = param.opts[0].lstrip("-").upper()


# Panels of --help, in the order a user decides: what, which models, where, how judged, what reported.
WHAT = "What to evaluate"
MODELS = "Which models"
WHERE = "Where it runs"
JUDGED = "How it is judged"
REPORTED = "What is reported"

app = typer.Typer(
    name="skill-eval",
    cls=_Commands,
    help="Does this agent skill's text make a coding agent behave the way it promises?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

RepoOpt = Annotated[
    str,
    typer.Option(
        "--repo",
        help="Skill repo: a local checkout, s3://bucket/prefix/ (a tree of objects) or s3://bucket/key.tar.gz.",
        show_default="current directory",
        rich_help_panel=WHAT,
    ),
]


def _repo_folder(spec: str) -> Path:
    """``--repo`` as a local folder: a path as given, or an S3 repo fetched into a temporary folder
    (removed when the command exits) that then goes through the same loading and snapshot code."""
    if not is_remote(spec):
        return Path(spec)
    folder = Path(tempfile.mkdtemp(prefix="skill-eval-repo-"))
    atexit.register(shutil.rmtree, folder, True)
    return fetch_repo(spec, folder)


AllEvalsOpt = Annotated[
    bool, typer.Option("--all-evals", help="Every evals/*.evals.json corpus.", rich_help_panel=WHAT)
]
JudgeOpt = Annotated[
    list[str] | None, typer.Option("--judge", help="Judge model (repeatable: an ensemble).", rich_help_panel=JUDGED)
]
# Not click-required: a dry run plans without models. The mark says so instead.
RUN_REQUIRED = " \\[required, except with --dry-run]"  # escaped: help text is Rich markup
RunJudgeOpt = Annotated[
    list[str] | None,
    typer.Option("--judge", help="Judge model (repeatable: an ensemble)." + RUN_REQUIRED, rich_help_panel=JUDGED),
]
GradeJudgeOpt = Annotated[
    list[str] | None,
    typer.Option("--judge", help="Judge model (repeatable: an ensemble). \\[required]", rich_help_panel=JUDGED),
]
OutOpt = Annotated[Path, typer.Option("--out", help="Report folder.", rich_help_panel=REPORTED)]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="Model config TOML (default ./skill-eval.toml).", rich_help_panel=MODELS),
]
ApiBaseOpt = Annotated[
    str | None, typer.Option("--api-base", help="API base URL for every model of the run.", rich_help_panel=MODELS)
]
WorkersOpt = Annotated[
    int,
    typer.Option(
        "--workers", min=1, help="Embedded cluster: shards in flight (threads of its workers).", rich_help_panel=WHERE
    ),
]
WorkerProcessesOpt = Annotated[
    int | None,
    typer.Option(
        "--worker-processes",
        min=1,
        help="Embedded cluster: worker processes sharing --workers (default: one per 16, at most one per core;"
        " env SKILL_EVAL_WORKER_PROCESSES).",
        rich_help_panel=WHERE,
    ),
]
BrokerOpt = Annotated[
    str | None,
    typer.Option("--broker", help="Redis URL of a cluster (env SKILL_EVAL_BROKER_URL).", rich_help_panel=WHERE),
]
StoreOpt = Annotated[
    str | None,
    typer.Option("--store", help="Artifact store: folder or s3://... (env SKILL_EVAL_STORE).", rich_help_panel=WHERE),
]
SandboxOpt = Annotated[
    SandboxMode | None,
    typer.Option("--sandbox", help="bwrap (default) or none (explicit opt-out).", rich_help_panel=WHERE),
]
StrictEvidenceOpt = Annotated[
    bool,
    typer.Option(
        "--strict-evidence", help="A pass whose quote is not in the transcript fails.", rich_help_panel=JUDGED
    ),
]
NoCalibrationOpt = Annotated[
    bool, typer.Option("--no-calibration", help="Skip judge calibration (reported).", rich_help_panel=JUDGED)
]
MaxCostOpt = Annotated[
    float | None,
    typer.Option(
        "--max-cost", min=0.0, help="Run-wide cap on model spend in USD (executor and judge).", rich_help_panel=MODELS
    ),
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tokens", min=1, help="Run-wide cap on model tokens (executor and judge).", rich_help_panel=MODELS
    ),
]
NoPreflightOpt = Annotated[
    bool,
    typer.Option(
        "--no-preflight", help="Skip the workers' model check (key, one call) before dispatch.", rich_help_panel=MODELS
    ),
]
FailUnderOpt = Annotated[
    float | None,
    typer.Option(
        "--fail-under",
        min=0.0,
        max=1.0,
        help="A corpus passes when its behavioural pass rate reaches this threshold (0-1); FAIL below it."
        " Default 1.0: every assertion must pass.",
        show_default=False,
        rich_help_panel=JUDGED,
    ),
]
DetachOpt = Annotated[
    bool, typer.Option("--detach", help="With --broker: submit, print the run id, return.", rich_help_panel=WHERE)
]
SkillsArg = Annotated[list[str] | None, typer.Argument(help="Skill names.", show_default=False)]


def _need_targets(skills: list[str], all_evals: bool) -> None:
    if not skills and not all_evals:
        raise ConfigError("name a skill to evaluate, or pass --all-evals (skill-eval never defaults to all)")


@app.command()
def validate(skills: SkillsArg = None, all_evals: AllEvalsOpt = False, repo: RepoOpt = ".") -> None:
    """Validate corpora against schema v1: one line per corpus, exit 0 when all are valid, else 2."""
    skills = skills or []
    _need_targets(skills, all_evals)
    check_repo_path(repo)
    r = Repo(_repo_folder(repo))
    files = behavioural_targets(r, skills, all_evals)
    bad = 0
    outcomes = r.load_many(files)
    for outcome in outcomes:
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
    checked = validate_trigger_corpora(r, skills, all_evals, out)
    bad += checked.bad
    if not files and not checked.files:
        out.print(f"no corpora found under {r.root}/evals/")
    # What a run would block per case: said now, without changing whether the corpora are valid.
    for line in fixture_guards(r.root, [o.bundle for o in outcomes if o.bundle]):
        out.print(line, markup=False, highlight=False)
    raise typer.Exit(ExitCode.BLOCKED if bad else ExitCode.PASS)


@app.command()
def run(
    skills: SkillsArg = None,
    all_evals: AllEvalsOpt = False,
    repo: RepoOpt = ".",
    compare: Annotated[
        str | None,
        typer.Option("--compare", help="Also grade the skill as at this git ref.", rich_help_panel=WHAT),
    ] = None,
    baseline: BaselineOpt = None,
    require_uplift: RequireUpliftOpt = None,
    regression_alpha: RegressionAlphaOpt = None,
    epochs: Annotated[
        int,
        typer.Option(
            "--epochs", "--runs", min=1, help="Repetitions per case and model (--runs: the same).", rich_help_panel=WHAT
        ),
    ] = 1,
    force: Annotated[
        bool,
        typer.Option("--force", help="--all-evals: re-run corpora that already have a report.", rich_help_panel=WHAT),
    ] = False,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model", help="Executor model, a litellm name (repeatable)." + RUN_REQUIRED, rich_help_panel=MODELS
        ),
    ] = None,
    config: ConfigOpt = None,
    api_base: ApiBaseOpt = None,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="agent, claude-code, codex, opencode, or cmd:'<agent CLI command line>'.",
            rich_help_panel=WHERE,
        ),
    ] = "agent",
    invoke: Annotated[
        str,
        typer.Option(
            "--invoke",
            help="Harness executors: explicit (use the skill) or implicit (bare prompt).",
            rich_help_panel=WHAT,
        ),
    ] = "explicit",
    sandbox: SandboxOpt = None,
    max_turns: Annotated[
        int, typer.Option("--max-turns", min=1, help="Executor turns per shard.", rich_help_panel=WHERE)
    ] = 40,
    shard_timeout: Annotated[
        float,
        typer.Option("--shard-timeout", help="Executor wall clock per shard, seconds.", rich_help_panel=WHERE),
    ] = 900.0,
    workers: WorkersOpt = 8,
    worker_processes: WorkerProcessesOpt = None,
    broker: BrokerOpt = None,
    store: StoreOpt = None,
    detach: DetachOpt = False,
    judge: RunJudgeOpt = None,
    strict_evidence: StrictEvidenceOpt = False,
    no_calibration: NoCalibrationOpt = False,
    calibrate_with: Annotated[
        list[str] | None,
        typer.Option("--calibrate-with", help="Earlier run whose human labels the judges must match (repeatable)."),
    ] = None,
    no_preflight: NoPreflightOpt = False,
    max_cost: MaxCostOpt = None,
    max_tokens: MaxTokensOpt = None,
    fail_under: FailUnderOpt = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            min=0.0,
            max=1.0,
            help="Claude Code plugin eval suites: FAIL when any case's score is below this (0 to 1).",
            rich_help_panel=REPORTED,
        ),
    ] = None,
    out_dir: OutOpt = Path(DEFAULT_REPORT_DIR),
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Validate and print the plan; enqueue nothing.", rich_help_panel=REPORTED),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="With --dry-run: print the plan as one JSON object.", rich_help_panel=REPORTED),
    ] = False,
    triggers: TriggersOpt = False,
    trigger_turns: TriggerTurnsOpt = DEFAULT_TURNS,
    min_recall: MinRecallOpt = None,
    max_false_trigger: MaxFalseTriggerOpt = None,
) -> None:
    """Evaluate skills: plan, shard onto the queues, execute, grade, reduce, report. Exit code is the verdict's."""
    skills = skills or []
    _need_targets(skills, all_evals)
    check_arms(baseline, require_uplift, regression_alpha, compare)
    trigger_run = trigger_settings(
        triggers,
        trigger_turns,
        min_recall,
        max_false_trigger,
        executor,
        {
            "--baseline": baseline,
            "--fail-under": fail_under,
            "--threshold": threshold,
            "--require-uplift": require_uplift,
            "--regression-alpha": regression_alpha,
            "--calibrate-with": calibrate_with or None,
        },
    )
    # Every flag the run would refuse, refused here: before a dry run's plan and before a cluster starts.
    check_repo_path(repo)
    check_executor(executor)
    check_invoke(invoke)
    check_api_base(api_base)
    settings = _settings(broker_url=broker, store=store, sandbox=sandbox, worker_processes=worker_processes)
    check_detach(detach, settings.broker_url)
    check_shard_timeout(shard_timeout, settings)
    if calibrate_with and no_calibration:
        raise ConfigError("--calibrate-with needs calibration: drop --no-calibration")
    calibration_runs = check_calibration_runs(open_store(settings.store), calibrate_with) if calibrate_with else ()
    repo_folder = _repo_folder(repo)
    model_config = load_model_config(config, api_base, untrusted=repo_folder)  # no key is looked at
    if dry_run and trigger_run is not None:
        trigger_dry_run(skills, all_evals, repo_folder, model or ["(unspecified)"], epochs, trigger_turns, out, as_json)
    if dry_run:
        plan_in = PlanInput(
            model or [], judge or [], epochs, arm_variants(compare, baseline), compare, settings.store, executor
        )
        raise typer.Exit(dry_run_plan(skills, all_evals, repo_folder, plan_in, as_json, out))
    if trigger_run is not None and not model:  # --judge is accepted and unused: nothing is judged
        raise ConfigError("--model is required (litellm model names; see README)")
    if not model or (not judge and trigger_run is None):
        raise ConfigError("--model and --judge are required (litellm model names; see README)")
    req = RunRequest(
        skills=skills,
        all_evals=all_evals,
        repo=repo_folder,
        models=model,
        judges=judge if trigger_run is None and judge else [],
        epochs=epochs,
        out=out_dir,
        workers=workers,
        detach=detach,
        force=force,
        show_progress=sys.stderr.isatty(),
        compare=compare,
        baseline=baseline,
        preflight=not no_preflight,
        settings=RunSettings(
            budget=AgentBudget(max_turns=max_turns, wall_clock_s=shard_timeout),
            executor=executor,
            invoke=invoke,  # type: ignore[arg-type]  # checked above
            strict_evidence=strict_evidence,
            calibrate=not no_calibration and trigger_run is None,
            calibrate_with=calibration_runs,
            fail_under=fail_under,
            plugin_threshold=threshold,
            regression_alpha=regression_alpha,
            require_uplift=require_uplift,
            max_cost_usd=max_cost or None,
            max_tokens=max_tokens,
            models=_run_models(model_config, workers, settings),
            triggers=trigger_run,
        ),
        triggers=trigger_run is not None,
    )
    conclude(run_evaluation(req, settings, out, err))


def conclude(outcome: RunResult | str) -> None:
    """Exit with the verdict's code, or print the run id alone when detached."""
    if isinstance(outcome, str):
        sys.stdout.write(outcome + "\n")
        raise typer.Exit(ExitCode.PASS)
    raise typer.Exit(outcome.verdict.exit_code)


def _run_models(config: ModelConfig, workers: int, settings: Settings) -> ModelConfig:
    """The run's model config; on an embedded cluster, models left at the default concurrency follow ``--workers``."""
    if settings.broker_url:
        return config
    return config.model_copy(update={"calls_in_flight": workers})


def _settings(**overrides: Any) -> Settings:
    """Settings from env (SKILL_EVAL_*) with flags given on the command line taking precedence."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


@app.command()
def grade(
    skills: Annotated[
        list[str] | None,
        typer.Argument(help="Skill names (default: every skill recorded).", show_default=False),
    ] = None,
    trajectories: Annotated[
        str,
        typer.Option(
            "--trajectories", help="Folder or s3://bucket/prefix of recordings. \\[required]", rich_help_panel=WHAT
        ),
    ] = "",
    repo: RepoOpt = ".",
    config: ConfigOpt = None,
    api_base: ApiBaseOpt = None,
    workers: WorkersOpt = 8,
    worker_processes: WorkerProcessesOpt = None,
    broker: BrokerOpt = None,
    store: StoreOpt = None,
    detach: DetachOpt = False,
    judge: GradeJudgeOpt = None,
    strict_evidence: StrictEvidenceOpt = False,
    no_calibration: NoCalibrationOpt = False,
    no_preflight: NoPreflightOpt = False,
    max_cost: MaxCostOpt = None,
    max_tokens: MaxTokensOpt = None,
    fail_under: FailUnderOpt = None,
    out_dir: OutOpt = Path(DEFAULT_REPORT_DIR),
) -> None:
    """Grade recorded trajectories (own JSON or Claude Code stream-json) against the corpora; no execution.

    Layout: <root>/<skill>/case-<id>[.epoch-<n>].json|.jsonl
    """
    if not trajectories or not judge:
        raise ConfigError("--trajectories and --judge are required")
    check_repo_path(repo)
    check_api_base(api_base)
    settings = _settings(broker_url=broker, store=store, worker_processes=worker_processes)
    check_detach(detach, settings.broker_url)
    repo_folder = _repo_folder(repo)
    req = RunRequest(
        skills=skills or [],
        all_evals=False,
        repo=repo_folder,
        models=[],
        judges=judge,
        out=out_dir,
        workers=workers,
        detach=detach,
        show_progress=sys.stderr.isatty(),
        preflight=not no_preflight,
        settings=RunSettings(
            strict_evidence=strict_evidence,
            calibrate=not no_calibration,
            fail_under=fail_under,
            max_cost_usd=max_cost or None,
            max_tokens=max_tokens,
            models=_run_models(load_model_config(config, api_base, untrusted=repo_folder), workers, settings),
        ),
    )
    conclude(grade_recorded(req, trajectories, settings, out, err))


@app.command()
def worker(
    queues: Annotated[str, typer.Option("--queues", help="Comma-separated queues to consume.")] = ",".join(ALL_QUEUES),
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Shards in flight (threads).")] = 8,
    broker: BrokerOpt = None,
    store: StoreOpt = None,
    sandbox: SandboxOpt = None,
    loglevel: Annotated[str, typer.Option("--loglevel", help="Celery log level.")] = "INFO",
    name: Annotated[str | None, typer.Option("--name", help="Node name (env SKILL_EVAL_NODE_NAME).")] = None,
    health: Annotated[
        bool, typer.Option("--health", help="Probe: exit 0 when this host's worker beats and consumes, else 1.")
    ] = False,
) -> None:
    """Start a worker for a cluster (execute, grade and reduce queues by default)."""
    settings = _settings(broker_url=broker, store=store, sandbox=sandbox)
    if not settings.broker_url:
        raise ConfigError("a worker needs --broker or SKILL_EVAL_BROKER_URL")
    if health:
        probe = node_name_for_probe(settings, name)
        if not probe:
            raise ConfigError("no worker node to probe: pass --name or set SKILL_EVAL_NODE_NAME")
        verdict = node_health(settings, probe)
        (out if verdict.ok else err).print(f"{probe}: {verdict.reason}", markup=False, highlight=False)
        raise typer.Exit(ExitCode.PASS if verdict.ok else ExitCode.FAIL)
    unknown = set(queues.split(",")) - set(ALL_QUEUES)
    if unknown:
        raise ConfigError(f"unknown queue(s) {', '.join(sorted(unknown))}; known: {', '.join(ALL_QUEUES)}")
    if settings.sandbox is SandboxMode.BWRAP and "execute" in queues.split(","):
        check_host_sandbox()  # an execute worker that cannot sandbox refuses to start: never unconfined
    node = name or settings.node_name or default_node_name()
    remember_node(settings, node)
    env = {
        **os.environ,
        "SKILL_EVAL_BROKER_URL": settings.broker_url,
        "SKILL_EVAL_STORE": settings.store,
        "SKILL_EVAL_SANDBOX": settings.sandbox.value,
        "SKILL_EVAL_NODE_NAME": node,
    }
    cmd = WorkerNode.serving(queues, concurrency, node, loglevel).command()
    os.execvpe(cmd[0], cmd, env)


@app.command()
def status(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object, for machines.")] = False,
    broker: BrokerOpt = None,
    store: StoreOpt = None,
) -> None:
    """Shard counts by state, whether the run is done, and per-model usage (a table; --json for machines)."""
    doc = run_status(run_id, _settings(broker_url=broker, store=store))
    if as_json:
        sys.stdout.write(doc.model_dump_json(indent=2) + "\n")
        return
    out.print(status_view(doc), highlight=False)


@app.command()
def report(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    out_dir: Annotated[Path | None, typer.Option("--out", help="Report folder (default: the run's).")] = None,
    store: StoreOpt = None,
) -> None:
    """Reduce again from the stored verdicts and write the reports; exit code is the verdict's."""
    result = rereport(run_id, _settings(store=store), out_dir, out)
    raise typer.Exit(result.verdict.exit_code)


@app.command()
def resubmit(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    only: Annotated[
        str | None,
        typer.Option("--only", help=f"Comma-separated states to run again (default: all of {', '.join(CHOICES)})."),
    ] = None,
    regrade: Annotated[
        bool, typer.Option("--regrade", help="Grade every graded shard again from its stored trajectory.")
    ] = False,
    judge: JudgeOpt = None,
    max_cost: MaxCostOpt = None,
    max_tokens: MaxTokensOpt = None,
    broker: BrokerOpt = None,
    store: StoreOpt = None,
) -> None:
    """Run again only the chosen shards of a run (cluster mode), keeping every earlier attempt's record.

    Infra failures and budget-exhausted shards by default; --regrade re-grades graded shards
    (with --judge, by other judges) without executing again. Graded shards are never re-executed.
    """
    done = resubmit_run(
        run_id,
        _settings(broker_url=broker, store=store),
        only=parse_only(only),
        regrade=regrade,
        judges=judge or [],
        max_cost_usd=max_cost,
        max_tokens=max_tokens,
    )
    for note in done.notes:
        err.print(note, markup=False)
    out.print(
        f"re-queued {done.total} shard(s) of run {run_id}: {len(done.execute)} to execute, "
        f"{len(done.grade)} to grade, {len(done.stale)} stale re-sent",
        markup=False,
    )


@app.command()
def schema(
    name: Annotated[
        str | None, typer.Argument(help="One schema: corpus, shard, run-plan, trajectory, shard-grade, trigger-set.")
    ] = None,
) -> None:
    """Print the JSON Schema of the data skill-eval reads and writes."""
    schemas = json_schemas()
    if name is not None and name not in schemas:
        raise ConfigError(f"unknown schema {name!r}; one of {', '.join(schemas)}")
    sys.stdout.write(json.dumps(schemas if name is None else schemas[name], indent=2) + "\n")


def _print_version(value: bool) -> None:
    if value:
        out.print(f"skill-eval {package_version('skill-eval')}", markup=False, highlight=False)
        raise typer.Exit(ExitCode.PASS)


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_print_version, is_eager=True)
    ] = False,
) -> None:
    pass


register_commands(app, out, err)
register_viewer_commands(app, out)


def main() -> None:
    """Entry point. Click (standalone) handles usage errors (usage line, ``--help`` hint, exit 2)
    and Ctrl-C (exit 130); an unexpected crash is the evaluator failing, never a verdict: it
    exits 2, not 1 (which would read as a behavioural FAIL in CI)."""
    try:
        app(args=fill_optional_values(sys.argv[1:]))
    except Exception as exc:
        err.print(f"INFRA_ERROR: {type(exc).__name__}: {exc}", markup=False, highlight=False)
        sys.exit(ExitCode.BLOCKED)


if __name__ == "__main__":
    main()
