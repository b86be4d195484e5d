"""The options of the command line, each declared once, and the group ``run`` and ``grade`` share.

A command names an option by its alias here (``repo: RepoOpt = "."``). The options both ``run``
and ``grade`` take are one :class:`Shared` value: :func:`with_shared` adds them to a command's
signature (where Typer reads its options) and hands them to it grouped, so a new shared option
is one alias here and one field of :class:`Shared`.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from typer.models import ArgumentInfo, ParameterInfo

from engine.repo_source import fetch_repo, is_remote
from engine.settings import Settings
from harnesses.registry import executor_help
from producer.launch.fleet_checks import check_broker
from schemas.constants import DEFAULT_REPORT_DIR
from schemas.errors import ConfigError
from schemas.manifest import RunSettings
from schemas.model_config import ModelConfig, load_model_config
from schemas.shard import GUTTED, NO_SKILL, SAME
from schemas.status import SandboxMode

# Panels of --help, in the order a user decides: what, which models, where, how judged, what reported.
WHAT = "What to evaluate"
MODELS = "Which models"
WHERE = "Where it runs"
JUDGED = "How it is judged"
REPORTED = "What is reported"
PANELS = (WHAT, MODELS, WHERE, JUDGED, REPORTED)

# Not click-required: a dry run plans without models. The mark says so instead.
RUN_REQUIRED = " \\[required, except with --dry-run]"  # escaped: help text is Rich markup
JUDGE_HELP = "Judge model (repeatable: an ensemble)."


def _option(*names: str, panel: str | None = None, **kwargs: Any) -> Any:
    return typer.Option(*names, rich_help_panel=panel, **kwargs)


RepoOpt = Annotated[
    str,
    _option(
        "--repo",
        help="Skill repo: a local checkout, s3://bucket/prefix/ (a tree of objects) or s3://bucket/key.tar.gz.",
        show_default="current directory",
        panel=WHAT,
    ),
]
AllEvalsOpt = Annotated[bool, _option("--all-evals", help="Every evals/*.evals.json corpus.", panel=WHAT)]
SkillsArg = Annotated[list[str] | None, typer.Argument(help="Skill names.", show_default=False)]
GradeSkillsArg = Annotated[
    list[str] | None, typer.Argument(help="Skill names (default: every skill recorded).", show_default=False)
]
CompareOpt = Annotated[str | None, _option("--compare", help="Also grade the skill as at this git ref.", panel=WHAT)]
EpochsOpt = Annotated[
    str,
    _option(
        "--epochs",
        "--runs",
        help="Repetitions per case and model (--runs: the same), or auto: more where the outcome is uncertain.",
        panel=WHAT,
    ),
]
MaxEpochsOpt = Annotated[
    int | None, _option("--max-epochs", min=1, help="--epochs auto: the most epochs any case gets.", panel=WHAT)
]
ForceOpt = Annotated[
    bool, _option("--force", help="--all-evals: re-run corpora that already have a report.", panel=WHAT)
]
InvokeOpt = Annotated[
    str, _option("--invoke", help="Harness executors: explicit (use the skill) or implicit (bare prompt).", panel=WHAT)
]
TrajectoriesOpt = Annotated[
    str, _option("--trajectories", help="Folder or s3://bucket/prefix of recordings. \\[required]", panel=WHAT)
]

ModelOpt = Annotated[
    list[str] | None,
    _option("--model", help="Executor model, a litellm name (repeatable)." + RUN_REQUIRED, panel=MODELS),
]
CheckModelOpt = Annotated[
    list[str] | None,
    _option("--model", help="A model the run would use: refused when no given --executor can run it.", panel=MODELS),
]
ConfigOpt = Annotated[
    Path | None, _option("--config", help="Model config TOML (default ./skill-eval.toml).", panel=MODELS)
]
ApiBaseOpt = Annotated[str | None, _option("--api-base", help="API base URL for every model of the run.", panel=MODELS)]
MaxCostOpt = Annotated[
    float | None,
    _option(
        "--max-cost",
        min=0.0,
        help="Run-wide cap on model spend in USD (executor and judge); refused for a model litellm cannot price"
        " (cap it with --max-tokens).",
        panel=MODELS,
    ),
]
MaxTokensOpt = Annotated[
    int | None, _option("--max-tokens", min=1, help="Run-wide cap on model tokens (executor and judge).", panel=MODELS)
]
NoPreflightOpt = Annotated[
    bool, _option("--no-preflight", help="Skip the workers' model check (key, one call) before dispatch.", panel=MODELS)
]

ExecutorOpt = Annotated[
    list[str] | None,
    _option(
        "--executor",
        help=executor_help() + " Repeatable: a sweep runs each with the given models it can speak.",
        panel=WHERE,
    ),
]
SandboxOpt = Annotated[
    SandboxMode | None, _option("--sandbox", help="bwrap (default) or none (explicit opt-out).", panel=WHERE)
]
MaxTurnsOpt = Annotated[int, _option("--max-turns", min=1, help="Executor turns per shard.", panel=WHERE)]
ShardTimeoutOpt = Annotated[
    float, _option("--shard-timeout", help="Executor wall clock per shard, seconds.", panel=WHERE)
]
WorkersOpt = Annotated[
    int, _option("--workers", min=1, help="Embedded cluster: shards in flight (threads of its workers).", panel=WHERE)
]
WorkerProcessesOpt = Annotated[
    int | None,
    _option(
        "--worker-processes",
        min=1,
        help="Embedded cluster: worker processes sharing --workers (default: one per 16, at most one per core;"
        " env SKILL_EVAL_WORKER_PROCESSES).",
        panel=WHERE,
    ),
]
BrokerOpt = Annotated[
    str | None, _option("--broker", help="Redis URL of a cluster (env SKILL_EVAL_BROKER_URL).", panel=WHERE)
]
StoreOpt = Annotated[
    str | None, _option("--store", help="Artifact store: folder or s3://... (env SKILL_EVAL_STORE).", panel=WHERE)
]
DetachOpt = Annotated[bool, _option("--detach", help="With --broker: submit, print the run id, return.", panel=WHERE)]

JudgeOpt = Annotated[list[str] | None, _option("--judge", help=JUDGE_HELP, panel=JUDGED)]
RunJudgeOpt = Annotated[list[str] | None, _option("--judge", help=JUDGE_HELP + RUN_REQUIRED, panel=JUDGED)]
GradeJudgeOpt = Annotated[list[str] | None, _option("--judge", help=JUDGE_HELP + " \\[required]", panel=JUDGED)]
StrictEvidenceOpt = Annotated[
    bool, _option("--strict-evidence", help="A pass whose quote is not in the transcript fails.", panel=JUDGED)
]
NoCalibrationOpt = Annotated[bool, _option("--no-calibration", help="Skip judge calibration (reported).", panel=JUDGED)]
CalibrateWithOpt = Annotated[
    list[str] | None,
    typer.Option("--calibrate-with", help="Earlier run whose human labels the judges must match (repeatable)."),
]
FailUnderOpt = Annotated[
    float | None,
    _option(
        "--fail-under",
        min=0.0,
        max=1.0,
        help="A corpus passes when its behavioural pass rate reaches this threshold (0-1); FAIL below it."
        " Default 1.0: every assertion must pass.",
        show_default=False,
        panel=JUDGED,
    ),
]

OutOpt = Annotated[Path, _option("--out", help="Report folder.", panel=REPORTED)]
ThresholdOpt = Annotated[
    float | None,
    _option(
        "--threshold",
        min=0.0,
        max=1.0,
        help="Claude Code plugin eval suites: FAIL when any case's score is below this (0 to 1);"
        " refused for a run without one (a corpus's pass rate: --fail-under).",
        panel=REPORTED,
    ),
]
DryRunOpt = Annotated[bool, _option("--dry-run", help="Validate and print the plan; enqueue nothing.", panel=REPORTED)]
JsonPlanOpt = Annotated[
    bool, _option("--json", help="With --dry-run: print the plan as one JSON object.", panel=REPORTED)
]


# The arms of a run and the gates on comparing them.
BASELINES = (NO_SKILL, SAME, GUTTED)
"""What ``--baseline`` accepts."""
BaselineOpt = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        help="no-skill: also run every case with the skill absent (workspace and prompt). "
        "same: run the current skill twice, to measure the noise floor. "
        "gutted: also run the skill with its instructions removed, to measure the suite's sensitivity.",
    ),
]
RequireUpliftOpt = Annotated[
    float | None,
    typer.Option(
        "--require-uplift",
        min=-1.0,
        max=0.99,
        help="[MARGIN] FAIL unless the uplift over no skill has a 95% lower bound above MARGIN (default 0).",
    ),
]
RegressionAlphaOpt = Annotated[
    float | None,
    typer.Option(
        "--regression-alpha",
        min=0.0001,
        max=0.5,
        help="Only a one-sided drop significant at this level is a regression (Holm over every corpus's"
        " overall test and assertions together). Default: unset, any drop against --compare's ref is a regression.",
        show_default=False,
    ),
]

OPTIONAL_VALUE_FLAGS = {"--require-uplift": "0"}
"""Flags whose value may be left out: ``--require-uplift`` alone means a margin of 0."""


def fill_optional_values(argv: Sequence[str]) -> list[str]:
    """Give a bare ``--require-uplift`` its default margin, so click can parse it as an option with a value."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg in OPTIONAL_VALUE_FLAGS:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if nxt is None or not _is_number(nxt):
                out.append(OPTIONAL_VALUE_FLAGS[arg])
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def check_arms(
    baseline: str | None, require_uplift: float | None, regression_alpha: float | None, compare: str | None
) -> None:
    """Refuse flag combinations that cannot mean anything, with a named error."""
    if baseline is not None and baseline not in BASELINES:
        raise ConfigError(
            f"--baseline {baseline!r}: expected one of {', '.join(BASELINES)} (an old ref is --compare REF)"
        )
    if require_uplift is not None and baseline != NO_SKILL:
        raise ConfigError("--require-uplift needs --baseline no-skill: the uplift is measured over no skill")
    if regression_alpha is not None and not compare:
        raise ConfigError("--regression-alpha needs --compare REF: a regression is a drop against an old ref")


@dataclass(frozen=True)
class Shared:
    """The options ``run`` and ``grade`` both take, as given on the command line."""

    repo: RepoOpt = "."
    config: ConfigOpt = None
    api_base: ApiBaseOpt = None
    workers: WorkersOpt = 8
    worker_processes: WorkerProcessesOpt = None
    broker: BrokerOpt = None
    store: StoreOpt = None
    detach: DetachOpt = False
    strict_evidence: StrictEvidenceOpt = False
    no_calibration: NoCalibrationOpt = False
    no_preflight: NoPreflightOpt = False
    max_cost: MaxCostOpt = None
    max_tokens: MaxTokensOpt = None
    fail_under: FailUnderOpt = None
    out_dir: OutOpt = Path(DEFAULT_REPORT_DIR)

    def settings(self, **overrides: Any) -> Settings:
        """The command's settings: env (SKILL_EVAL_*) under the flags given (``--out`` checked first:
        the reports are written after the run, too late to refuse it)."""
        check_out_dir(self.out_dir)
        given: dict[str, Any] = {"broker_url": self.broker, "store": self.store}
        return settings_from(**given, worker_processes=self.worker_processes, **overrides)

    def run_settings(self, models: ModelConfig, **fields_: Any) -> RunSettings:
        """The run's settings from the shared options and the command's own ``fields_``."""
        return RunSettings(
            strict_evidence=self.strict_evidence,
            fail_under=self.fail_under,
            max_cost_usd=self.max_cost or None,
            max_tokens=self.max_tokens,
            models=models,
            **{"calibrate": not self.no_calibration, **fields_},
        )

    def model_config(self, repo_folder: Path, settings: Settings) -> ModelConfig:
        """The run's model config (no key is looked at); on an embedded cluster, models left at the
        default concurrency follow ``--workers``."""
        config = load_model_config(self.config, self.api_base, untrusted=repo_folder)
        if settings.broker_url:
            return config
        return config.model_copy(update={"calls_in_flight": self.workers})


def _declared(cls: type) -> dict[str, inspect.Parameter]:
    """A dataclass's fields as the parameters of a command's signature (Typer reads options from there)."""
    hints = get_type_hints(cls, include_extras=True)
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return {f.name: inspect.Parameter(f.name, kind, default=f.default, annotation=hints[f.name]) for f in fields(cls)}


_SHARED = _declared(Shared)


def with_shared(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with the :class:`Shared` options added to its own, handed to it as ``shared``.

    In ``--help`` each option stands in its panel (what, models, where, judged, reported), the
    command's own first within each.
    """
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "shared"]
    params = sorted([*own, *_SHARED.values()], key=_place)

    @functools.wraps(command)
    def wrapper(**given: Any) -> None:
        shared = Shared(**{name: given.pop(name) for name in _SHARED})
        command(**given, shared=shared)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


def _place(param: inspect.Parameter) -> int:
    """Where a parameter stands: arguments first, then options by panel, then those of no panel."""
    info = next((m for m in getattr(param.annotation, "__metadata__", ()) if isinstance(m, ParameterInfo)), None)
    if isinstance(info, ArgumentInfo):
        return -1
    panel = getattr(info, "rich_help_panel", None)
    return PANELS.index(panel) if panel in PANELS else len(PANELS)


def settings_from(*, reach_broker: bool = True, **overrides: Any) -> Settings:
    """Settings from env (SKILL_EVAL_*) with flags given on the command line taking precedence.

    A broker URL is checked here, where it enters, and (unless ``reach_broker`` is false) pinged.
    """
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    if settings.broker_url:
        named = "--broker" if overrides.get("broker_url") else "SKILL_EVAL_BROKER_URL"
        check_broker(settings.broker_url, named, reach=reach_broker)
    return settings


def check_out_dir(path: Path, flag: str = "--out") -> None:
    """Raise ``ConfigError`` naming ``flag`` when ``path`` or a folder above it is a file (it could
    never be created as a folder); a missing folder is fine, it is made when written."""
    for place in (path, *path.parents):
        if place.is_dir():
            return
        if place.exists() or place.is_symlink():
            raise ConfigError(f"{flag} {path}: {place} is a file, not a folder; name a folder (made when missing)")


def repo_folder(spec: str) -> Path:
    """``--repo`` as a local folder: a path as given, or an S3 repo fetched into a temporary folder
    (removed when the command exits) that then goes through the same loading and snapshot code."""
    if not is_remote(spec):
        return Path(spec)
    folder = Path(tempfile.mkdtemp(prefix="skill-eval-repo-"))
    atexit.register(shutil.rmtree, folder, True)
    return fetch_repo(spec, folder)
