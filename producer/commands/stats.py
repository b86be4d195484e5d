"""Command-line pieces for baselines and statistics: the ``run`` options for a no-skill arm and
the comparison gates, and the ``assertions`` and ``export`` commands.

Kept apart from :mod:`producer.commands.cli` so that module only declares and wires them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from engine.settings import Settings
from engine.store import ArtifactStore, open_store
from schemas.errors import ConfigError, SkillEvalError
from schemas.manifest import RunManifest, result_key
from schemas.report import RunResult
from schemas.shard import GUTTED, NO_SKILL, SAME
from schemas.status import ExitCode

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
        help="Only a one-sided drop significant at this level is a regression (Holm over assertions).",
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


def load_run(run_id: str, store_uri: str | None) -> tuple[RunResult, RunManifest, ArtifactStore]:
    """The run's stored result (or a fresh reduce from its stored verdicts), manifest and store."""
    from engine.collect import reduce_from_store
    from engine.records import load_manifest

    settings = Settings(store=store_uri) if store_uri else Settings()
    store = open_store(settings.store)
    manifest = load_manifest(store, run_id)
    key = result_key(run_id)
    if store.exists(key):
        return RunResult.model_validate_json(store.get(key)), manifest, store
    return reduce_from_store(store, manifest), manifest, store


def assertion_lines(result: RunResult, show_all: bool = False) -> list[str]:
    """One line per assertion worth a look (every one with ``show_all``)."""
    rows = [
        q
        for q in result.assertion_quality
        if show_all or q.non_discriminating or q.flaky or (q.judge_disagreement or 0) > 0
    ]
    out = []
    for q in rows:
        flags = []
        if q.non_discriminating:
            flags.append(f"non-discriminating (always {q.constant})")
        if q.flaky:
            flags.append(f"flaky in {', '.join(q.flaky_in)}")
        if q.judge_disagreement:
            flags.append(f"judges disagree on {100 * q.judge_disagreement:.0f}% of shards")
        rate = "-" if q.pass_rate is None else f"{100 * q.pass_rate:.0f}%"
        out.append(
            f"{q.skill} case {q.case_id} assertion {q.index + 1}: {'; '.join(flags) or 'ok'} "
            f"[{q.observations} verdicts, {rate} passed] {q.text}"
        )
    return out


def register_commands(app: typer.Typer, out: Console, err: Console) -> None:
    """Add ``assertions`` and ``export`` to the CLI."""

    @app.command()
    def assertions(
        run_id: Annotated[str, typer.Argument(help="Run id.")],
        store: Annotated[str | None, typer.Option("--store", help="Artifact store (env SKILL_EVAL_STORE).")] = None,
        show_all: Annotated[bool, typer.Option("--all", help="Every assertion, not only the flagged ones.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="One JSON array.")] = False,
    ) -> None:
        """List assertions that cannot discriminate, flip across epochs, or split the judges."""
        try:
            result, _, _ = load_run(run_id, store)
        except SkillEvalError as exc:
            err.print(str(exc), markup=False, highlight=False)
            raise typer.Exit(ExitCode.BLOCKED) from exc
        if as_json:
            sys.stdout.write(json.dumps([q.model_dump(mode="json") for q in result.assertion_quality], indent=2) + "\n")
            return
        lines = assertion_lines(result, show_all)
        total = len(result.assertion_quality)
        out.print(f"run {run_id}: {total} assertions with graded verdicts, {len(lines)} listed", markup=False)
        for line in lines:
            out.print(line, markup=False, highlight=False)

    @app.command()
    def export(
        run_id: Annotated[str, typer.Argument(help="Run id.")],
        fmt: Annotated[str, typer.Option("--format", help="inspect: Inspect AI eval logs.")] = "inspect",
        out_dir: Annotated[Path, typer.Option("--out", help="Folder for the logs.")] = Path("zuvo/inspect"),
        store: Annotated[str | None, typer.Option("--store", help="Artifact store (env SKILL_EVAL_STORE).")] = None,
    ) -> None:
        """Export a run: one Inspect AI log per skill, variant and executor model (open with `inspect view`)."""
        from engine.collect import load_trajectory
        from producer.results.export_inspect import write_logs

        try:
            if fmt != "inspect":
                raise ConfigError(f"--format {fmt!r}: the only export format is 'inspect'")
            result, manifest, st = load_run(run_id, store)
            paths = write_logs(result, manifest, lambda shard_id: load_trajectory(st, run_id, shard_id), out_dir)
        except SkillEvalError as exc:
            err.print(str(exc), markup=False, highlight=False)
            raise typer.Exit(ExitCode.BLOCKED) from exc
        for path in paths:
            out.print(f"wrote {path}", markup=False, highlight=False)
