"""``skill-eval assertions`` and ``export``: commands that read a run's stored result.

A named error (a missing run, a bad ``--format``) takes the app's one error path
(producer/commands/app.py), as every command's does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from engine.settings import Settings
from engine.store import ArtifactStore, open_store
from producer.commands.app import out
from producer.commands.options import check_out_dir
from schemas.errors import ConfigError
from schemas.manifest import RunManifest
from schemas.report import RunResult
from schemas.visible import visible


def load_run(run_id: str, store_uri: str | None) -> tuple[RunResult, RunManifest, ArtifactStore]:
    """The run's stored result (or a fresh reduce from its stored verdicts), manifest and store."""
    from engine.collect import StoredRun
    from reducer.from_store import run_result

    settings = Settings(store=store_uri) if store_uri else Settings()
    store = open_store(settings.store, waited_on=True)
    records = StoredRun(store, run_id)
    manifest = records.manifest()  # a named error for a run that is not in the store
    return run_result(records, stream_from=settings.stream_reduce_shards, reuse=True).result, manifest, store


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


StoreOpt = Annotated[
    str | None, typer.Option("--store", help="Artifact store: folder or s3://... (env SKILL_EVAL_STORE).")
]


def assertions(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    store: StoreOpt = None,
    show_all: Annotated[bool, typer.Option("--all", help="Every assertion, not only the flagged ones.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array.")] = False,
) -> None:
    """List assertions that cannot discriminate, flip across epochs, or split the judges."""
    result, _, _ = load_run(run_id, store)
    if as_json:
        sys.stdout.write(json.dumps([q.model_dump(mode="json") for q in result.assertion_quality], indent=2) + "\n")
        return
    lines = assertion_lines(result, show_all)
    total = len(result.assertion_quality)
    out.print(f"run {run_id}: {total} assertions with graded verdicts, {len(lines)} listed", markup=False)
    for line in lines:  # an assertion's text is the corpus's: one line each
        out.print(visible(line), markup=False, highlight=False)


def export(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    fmt: Annotated[str, typer.Option("--format", help="inspect: Inspect AI eval logs.")] = "inspect",
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the logs.")] = Path("zuvo/inspect"),
    store: StoreOpt = None,
) -> None:
    """Export a run: one Inspect AI log per skill, variant and executor model (open with `inspect view`)."""
    from engine.collect import load_trajectory
    from engine.records import load_run_end
    from producer.results.export_inspect import write_logs

    if fmt != "inspect":
        raise ConfigError(f"--format {fmt!r}: the only export format is 'inspect'")
    check_out_dir(out_dir)
    result, manifest, st = load_run(run_id, store)
    end = load_run_end(st, run_id)
    paths = write_logs(result, manifest, lambda shard_id: load_trajectory(st, run_id, shard_id), out_dir, end)
    for path in paths:
        out.print(f"wrote {path}", markup=False, highlight=False)
