"""``skill-eval validate``, ``run`` and ``grade``: the commands that read corpora and evaluate."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer

from engine.labels import check_calibration_runs
from engine.litellm_table import bundled_model_table
from engine.settings import Settings
from engine.store import open_store
from harnesses.registry import check_executor
from producer.commands.app import ends_with_verdict, err, out
from producer.commands.options import (
    AllEvalsOpt,
    BaselineOpt,
    CalibrateWithOpt,
    CheckModelOpt,
    CompareOpt,
    DryRunOpt,
    EpochsOpt,
    ExecutorOpt,
    ForceOpt,
    GradeJudgeOpt,
    GradeSkillsArg,
    InvokeOpt,
    JsonPlanOpt,
    MaxEpochsOpt,
    MaxTurnsOpt,
    ModelOpt,
    RegressionAlphaOpt,
    RepoOpt,
    RequireUpliftOpt,
    RunJudgeOpt,
    SandboxOpt,
    ShardTimeoutOpt,
    Shared,
    SkillsArg,
    ThresholdOpt,
    TrajectoriesOpt,
    check_arms,
    repo_folder,
    with_shared,
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
from producer.launch.evaluate import run_evaluation
from producer.launch.fleet_checks import check_shard_timeout
from producer.launch.grade_only import grade_recorded
from producer.plan.dry_run import PlanInput, dry_run_plan
from producer.plan.epochs import parse_epochs
from producer.plan.harnesses import UNSPECIFIED, pair_harnesses, planned_harnesses
from producer.plan.model_names import check_cost_cap, check_model_names
from producer.plan.planning import arm_variants
from producer.plan.prechecks import (
    check_api_base,
    check_detach,
    check_invoke,
    check_repeats,
    check_repo_path,
    fixture_guards,
)
from producer.plan.repo_terms import check_repo_terms
from producer.plan.request import RunRequest
from schemas.adaptive import AdaptivePlan
from schemas.constants import BUILTIN_EXECUTOR
from schemas.errors import ConfigError
from schemas.manifest import AgentBudget, RunSettings
from schemas.model_config import ModelConfig, load_model_config
from schemas.report import RunResult
from schemas.status import ExitCode, SandboxMode
from schemas.triggers import TriggerSettings
from schemas.visible import visible

BEHAVIOURAL_FLAGS = (
    "--baseline",
    "--fail-under",
    "--threshold",
    "--require-uplift",
    "--regression-alpha",
    "--calibrate-with",
)
"""The flags of a behavioural run's arms and gates: a trigger run refuses them (trigger_cli.py: trigger_settings)."""


def need_targets(skills: list[str] | None, all_evals: bool) -> list[str]:
    """The named skills; a ``ConfigError`` when neither a skill nor ``--all-evals`` is given, when
    both are (which one was meant cannot be guessed), or when a skill is named twice."""
    if not skills and not all_evals:
        raise ConfigError("name a skill to evaluate, or pass --all-evals (skill-eval never defaults to all)")
    if skills and all_evals:
        raise ConfigError(
            f"skills named ({', '.join(skills)}) and --all-evals given: they conflict; name skills or pass --all-evals"
        )
    check_repeats("skill", skills or [])
    return skills or []


def validate(
    skills: SkillsArg = None,
    all_evals: AllEvalsOpt = False,
    repo: RepoOpt = ".",
    model: CheckModelOpt = None,
    executor: ExecutorOpt = None,
) -> None:
    """Validate corpora against schema v1 and say whether a run would block.

    One line per corpus; exit 0 when all are valid and the run would not block, else 2. With
    --model (and --executor), a model no given executor can run is refused too.
    """
    skills = need_targets(skills, all_evals)
    check_repo_path(repo)
    pair_harnesses(executor or [BUILTIN_EXECUTOR], model or [])
    r = Repo(repo_folder(repo))
    if model:  # refused as the run would refuse it, with the model config the run would read
        check_names(executor or [BUILTIN_EXECUTOR], model, [], load_model_config(untrusted=r.root))
    check_repo_terms(r.root, executor or [])
    files = behavioural_targets(r, skills, all_evals)
    bad = 0
    outcomes = r.load_many(files)
    for outcome in outcomes:
        if outcome.bundle:
            c = outcome.bundle.corpus
            line = f"OK {outcome.corpus_file}: {len(c.evals)} cases, {c.assertion_count} assertions"
        else:
            bad += 1
            line = str(outcome.error)
        out.print(visible(line) if outcome.bundle else line, markup=False, highlight=False)
    checked = validate_trigger_corpora(r, skills, all_evals, out)
    bad += checked.bad
    if not files and not checked.files:
        out.print(visible(f"no corpora found under {r.root}/evals/"), markup=False)
    # A lookalike is a warning, not a block: a case may keep an input file in evals/. A base fixture
    # without git blocks its case and so the run (FixtureNeedsGit.stops_run): a CI job gating on
    # validate must not go green for a run that ends BLOCKED.
    guards = fixture_guards(r.root, [o.bundle for o in outcomes if o.bundle])
    for line in [*map(visible, r.lookalike_warnings(outcomes)), *guards]:
        out.print(line, markup=False, highlight=False)
    raise typer.Exit(ExitCode.BLOCKED if bad or guards else ExitCode.PASS)


@with_shared
@ends_with_verdict
def run(
    skills: SkillsArg = None,
    all_evals: AllEvalsOpt = False,
    compare: CompareOpt = None,
    baseline: BaselineOpt = None,
    require_uplift: RequireUpliftOpt = None,
    regression_alpha: RegressionAlphaOpt = None,
    epochs: EpochsOpt = "1",
    max_epochs: MaxEpochsOpt = None,
    force: ForceOpt = False,
    model: ModelOpt = None,
    executor: ExecutorOpt = None,
    invoke: InvokeOpt = "explicit",
    sandbox: SandboxOpt = None,
    max_turns: MaxTurnsOpt = 40,
    shard_timeout: ShardTimeoutOpt = 900.0,
    judge: RunJudgeOpt = None,
    calibrate_with: CalibrateWithOpt = None,
    threshold: ThresholdOpt = None,
    dry_run: DryRunOpt = False,
    as_json: JsonPlanOpt = False,
    triggers: TriggersOpt = False,
    trigger_turns: TriggerTurnsOpt = DEFAULT_TURNS,
    min_recall: MinRecallOpt = None,
    max_false_trigger: MaxFalseTriggerOpt = None,
    *,
    shared: Shared,
) -> None:
    """Evaluate skills: plan, shard onto the queues, execute, grade, reduce, report. Exit code is the verdict's."""
    skills = need_targets(skills, all_evals)
    check_arms(baseline, require_uplift, regression_alpha, compare)
    settings, executors = _checked_settings(shared, executor, invoke, sandbox, shard_timeout)
    behavioural = _behavioural(shared, baseline, threshold, require_uplift, regression_alpha, calibrate_with)
    trigger_run = trigger_settings(triggers, trigger_turns, min_recall, max_false_trigger, executors, behavioural)
    calibration_runs = _calibration_runs(calibrate_with, shared, settings)
    folder = repo_folder(shared.repo)
    as_triggers = trigger_run is not None
    count, adaptive = parse_epochs(epochs, max_epochs, detach=shared.detach, triggers=as_triggers, baseline=baseline)
    harnesses = pair_harnesses(executors, model or [])
    models = _model_config(shared, folder, settings, executors, model, [] if as_triggers else judge)
    if dry_run:
        plan = _plan_input(model, judge, count, (compare, baseline, threshold), shared, settings, executors, adaptive)
        _dry_run(skills, all_evals, folder, plan, trigger_turns if as_triggers else None, as_json, behavioural)
    _require_models(model, judge, trigger_run)
    run_settings = shared.run_settings(
        models,
        budget=AgentBudget(max_turns=max_turns, wall_clock_s=shard_timeout),
        executor=executors[0],
        invoke=invoke,
        calibrate=not shared.no_calibration and trigger_run is None,
        calibrate_with=calibration_runs,
        plugin_threshold=threshold,
        regression_alpha=regression_alpha,
        require_uplift=require_uplift,
        triggers=trigger_run,
    )
    judges = judge if not as_triggers and judge else []
    arms = dict(epochs=count, adaptive=adaptive, force=force, compare=compare, baseline=baseline, triggers=as_triggers)
    req = _request(shared, skills, all_evals, folder, model or [], judges, run_settings, harnesses=harnesses, **arms)
    conclude(run_evaluation(req, settings, out, err), req.out)


def _plan_input(
    models: list[str] | None,
    judges: list[str] | None,
    epochs: int,
    arms: tuple[str | None, str | None, float | None],
    shared: Shared,
    settings: Settings,
    executors: list[str],
    adaptive: AdaptivePlan | None,
) -> PlanInput:
    """What a dry run plans: the arms (``--compare``, ``--baseline``; ``--threshold`` and the shared
    ``--fail-under`` checked against them), and a sweep's harness × model pairs (counted for one
    unnamed model each when no ``--model`` is given yet)."""
    compare, baseline, threshold = arms
    models, judges = models or [], judges or []
    harnesses = planned_harnesses(executors, models, pair_harnesses(executors, models))
    variants = arm_variants(compare, baseline)
    store, executor = settings.store, executors[0]
    return PlanInput(
        *(models, judges, epochs, variants, compare, store, executor, adaptive, harnesses),
        plugin_threshold=threshold,
        fail_under=shared.fail_under,
        sandbox=settings.sandbox,
    )


def _model_config(
    shared: Shared,
    folder: Path,
    settings: Settings,
    executors: list[str],
    models: list[str] | None,
    judges: list[str] | None,
) -> ModelConfig:
    """The run's model config (no key is looked at), once every model name litellm could not route is refused."""
    config = shared.model_config(folder, settings)
    check_names(executors, models or [], judges or [], config)
    check_cost_cap(shared.max_cost, [*(models or []), *(judges or [])], bundled_model_table())
    return config


def check_names(executors: list[str], models: list[str], judges: list[str], config: ModelConfig) -> None:
    """:func:`check_model_names` with litellm's table and what ``config`` sends straight over HTTP; a
    judge named twice is refused (it would sit on the panel twice and agree with itself)."""
    check_repeats("--judge", judges)
    direct = functools.partial(_goes_direct, config)
    check_model_names(executors, models, judges, bundled_model_table(), direct)


def _goes_direct(config: ModelConfig, model: str) -> bool:
    return config.for_model(model).transport == "direct"


def _behavioural(shared: Shared, *gates: object) -> dict[str, object]:
    """The behavioural flags given, by name (a trigger run refuses each one that is set)."""
    baseline, threshold, require_uplift, regression_alpha, calibrate_with = gates
    values = (baseline, shared.fail_under, threshold, require_uplift, regression_alpha, calibrate_with or None)
    return dict(zip(BEHAVIOURAL_FLAGS, values, strict=True))


def _dry_run(
    skills: list[str],
    all_evals: bool,
    folder: Path,
    plan_in: PlanInput,
    trigger_turns: int | None,
    as_json: bool,
    gates: dict[str, object],
) -> NoReturn:
    """Print what the run would do (a trigger run's plan with ``trigger_turns``; ``gates``: flags by name); exit."""
    if trigger_turns is not None:
        models = plan_in.models or [UNSPECIFIED]
        args = (plan_in.epochs, trigger_turns, out, as_json)
        trigger_dry_run(skills, all_evals, folder, models, *args, harnesses=plan_in.harnesses)
    raise typer.Exit(dry_run_plan(skills, all_evals, folder, plan_in.gated_by(gates), as_json, out))


def _checked_settings(
    shared: Shared, given: list[str] | None, invoke: str, sandbox: SandboxMode | None, shard_timeout: float
) -> tuple[Settings, list[str]]:
    """The run's settings and executors (``agent`` when none is given), once every flag the run would
    refuse is refused: before a dry run's plan and before a cluster starts. A sweep's settings name
    its first executor; each of its shards names its own."""
    check_repo_path(shared.repo)
    executors = given or [BUILTIN_EXECUTOR]
    for executor in executors:
        check_executor(executor)
    check_invoke(invoke)
    check_api_base(shared.api_base)
    settings = shared.settings(sandbox=sandbox)
    check_detach(shared.detach, settings.broker_url)
    check_shard_timeout(shard_timeout, settings)
    return settings, executors


def _calibration_runs(calibrate_with: list[str] | None, shared: Shared, settings: Settings) -> tuple[str, ...]:
    """The earlier runs whose labels the judges must match (each checked to have them)."""
    if calibrate_with and shared.no_calibration:
        raise ConfigError("--calibrate-with needs calibration: drop --no-calibration")
    return check_calibration_runs(open_store(settings.store), calibrate_with) if calibrate_with else ()


def _require_models(model: list[str] | None, judge: list[str] | None, trigger_run: TriggerSettings | None) -> None:
    if trigger_run is not None and not model:  # --judge is accepted and unused: nothing is judged
        raise ConfigError("--model is required (litellm model names; see README)")
    if not model or (not judge and trigger_run is None):
        raise ConfigError("--model and --judge are required (litellm model names; see README)")


def _request(
    shared: Shared,
    skills: list[str],
    all_evals: bool,
    folder: Path,
    models: list[str],
    judges: list[str],
    settings: RunSettings,
    **arms: Any,
) -> RunRequest:
    """What the run or grade was asked for, with the shared options."""
    return RunRequest(
        skills=skills,
        all_evals=all_evals,
        repo=folder,
        models=models,
        judges=judges,
        out=shared.out_dir,
        workers=shared.workers,
        detach=shared.detach,
        show_progress=sys.stderr.isatty(),
        preflight=not shared.no_preflight,
        settings=settings,
        **arms,
    )


@with_shared
@ends_with_verdict
def grade(
    skills: GradeSkillsArg = None,
    trajectories: TrajectoriesOpt = "",
    judge: GradeJudgeOpt = None,
    *,
    shared: Shared,
) -> None:
    """Grade recorded trajectories (own JSON or Claude Code stream-json) against the corpora; no execution.

    Layout: <root>/<skill>/case-<id>[.epoch-<n>].json|.jsonl
    """
    if not trajectories or not judge:
        raise ConfigError("--trajectories and --judge are required")
    check_repeats("skill", skills or [])
    check_repo_path(shared.repo)
    check_api_base(shared.api_base)
    settings = shared.settings()
    check_detach(shared.detach, settings.broker_url)
    folder = repo_folder(shared.repo)
    config = shared.model_config(folder, settings)
    check_names([], [], judge, config)
    check_cost_cap(shared.max_cost, judge, bundled_model_table())
    run_settings = shared.run_settings(config)
    req = _request(shared, skills or [], False, folder, [], judge, run_settings)
    conclude(grade_recorded(req, trajectories, settings, out, err), req.out)


def conclude(outcome: RunResult | str, reports: Path) -> None:
    """Exit with the verdict's code, or print the run id alone when detached (on stdout, for a
    script to capture), and on stderr where its reports will go: a detached run has none yet, and
    ``report RUN`` writes them to the folder its ``--out`` recorded."""
    if isinstance(outcome, str):
        err.print(
            f"reports: none yet; when the run is done, skill-eval report {outcome} writes them to {reports}/",
            markup=False,
            highlight=False,
        )
        sys.stdout.write(outcome + "\n")
        raise typer.Exit(ExitCode.PASS)
    raise typer.Exit(outcome.verdict.exit_code)
