"""``skill-eval worker``, ``status``, ``report`` and ``resubmit``: a cluster's workers and the runs it holds."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from engine.node import WorkerNode
from producer.commands.app import ends_with_verdict, err, out
from producer.commands.options import (
    BrokerOpt,
    JudgeOpt,
    MaxCostOpt,
    MaxTokensOpt,
    SandboxOpt,
    StoreOpt,
    check_out_dir,
    settings_from,
)
from producer.launch.fleet_checks import default_node_name, node_health, node_name_for_probe, remember_node
from producer.launch.resubmit import CHOICES, parse_only, resubmit_run
from producer.results.status_view import status_view
from producer.results.stored_run import rereport, run_status
from schemas.constants import ALL_QUEUES
from schemas.errors import ConfigError
from schemas.status import ExitCode, SandboxMode
from schemas.visible import inert_json
from schemas.words import noun

RunIdArg = Annotated[str, typer.Argument(help="Run id.")]


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
    # Not pinged: a starting worker waits for its broker (Celery retries), and --health says so itself.
    settings = settings_from(broker_url=broker, store=store, sandbox=sandbox, reach_broker=False)
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
        raise ConfigError(
            f"unknown {noun(len(unknown), 'queue')} {', '.join(sorted(unknown))}; known: {', '.join(ALL_QUEUES)}"
        )
    node = name or settings.node_name or default_node_name()
    remember_node(settings, node)
    env = {
        **os.environ,
        "SKILL_EVAL_BROKER_URL": settings.broker_url,
        "SKILL_EVAL_STORE": settings.store,
        "SKILL_EVAL_SANDBOX": settings.sandbox.value,
        "SKILL_EVAL_NODE_NAME": node,
    }
    # An execute worker that cannot sandbox refuses to start, never unconfined: the worker checks its host.
    sandboxed = settings.sandbox is SandboxMode.BWRAP and "execute" in queues.split(",")
    cmd = WorkerNode.serving(queues, concurrency, node, loglevel).command(check_sandbox=sandboxed)
    os.execvpe(cmd[0], cmd, env)


def status(
    run_id: RunIdArg,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object, for machines.")] = False,
    broker: BrokerOpt = None,
    store: StoreOpt = None,
) -> None:
    """Shard counts by state, whether the run is done, and per-model usage (a table; --json for machines)."""
    doc = run_status(run_id, settings_from(broker_url=broker, store=store))
    if as_json:
        sys.stdout.write(inert_json(doc.model_dump_json(indent=2)) + "\n")
        return
    # Tables fit the width; prose folds on a terminal and stays whole lines in a pipe or file.
    out.print(status_view(doc, fold=out.is_terminal), highlight=False, soft_wrap=False, crop=False)


@ends_with_verdict
def report(
    run_id: RunIdArg,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Report folder (default: the run's).")] = None,
    store: StoreOpt = None,
) -> None:
    """Reduce again from the stored verdicts and write the reports; exit code is the verdict's."""
    if out_dir is not None:
        check_out_dir(out_dir)
    result = rereport(run_id, settings_from(store=store), out_dir, out)
    raise typer.Exit(result.verdict.exit_code)


def resubmit(
    run_id: RunIdArg,
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
        settings_from(broker_url=broker, store=store),
        only=parse_only(only),
        regrade=regrade,
        judges=judge or [],
        max_cost_usd=max_cost,
        max_tokens=max_tokens,
    )
    for note in done.notes:
        err.print(note, markup=False)
    out.print(done.summary(run_id), markup=False)
