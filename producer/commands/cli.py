"""The ``skill-eval`` command line: every command wired onto the one app, and :func:`main`.

Thin: parses flags, calls the producer, prints, exits. The app and its error path are in
producer/commands/app.py, the options in producer/commands/options.py.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version as package_version
from typing import Annotated

import typer

from producer.commands import fleet, run, stats
from producer.commands.app import app, err, out
from producer.commands.options import fill_optional_values
from producer.corpus.published import published_schemas
from schemas.errors import ConfigError
from schemas.status import ExitCode
from schemas.visible import visible
from viewer.cli import register_commands as register_viewer_commands


def schema(
    name: Annotated[
        str | None, typer.Argument(help="One schema: corpus, shard, run-plan, trajectory, shard-grade, trigger-set.")
    ] = None,
) -> None:
    """Print the JSON Schema of the data skill-eval reads and writes."""
    schemas = published_schemas()
    if name is not None and name not in schemas:
        raise ConfigError(f"unknown schema {name!r}; one of {', '.join(schemas)}")
    sys.stdout.write(json.dumps(schemas if name is None else schemas[name], indent=2) + "\n")


def _print_version(value: bool) -> None:
    if value:
        out.print(f"skill-eval {package_version('skill-eval')}", markup=False, highlight=False)
        raise typer.Exit(ExitCode.PASS)


# In --help's order: evaluate, then the cluster and its runs, then the stored data, then the viewer.
for command in (run.validate, run.run, run.grade, fleet.worker, fleet.status, fleet.report, fleet.resubmit, schema):
    app.command()(command)
for command in (stats.assertions, stats.export):
    app.command()(command)
register_viewer_commands(app, out)


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_print_version, is_eager=True)
    ] = False,
) -> None:
    pass


def main() -> None:
    """Entry point. Click (standalone) handles usage errors (usage line, ``--help`` hint, exit 2)
    and Ctrl-C (exit 130); an unexpected crash is the evaluator failing, never a verdict: it
    exits 2, not 1 (which would read as a behavioural FAIL in CI). Its line is one line (the
    exception's own line breaks escaped), since scripts read a failed command's last line."""
    try:
        app(args=fill_optional_values(sys.argv[1:]))
    except Exception as exc:
        err.print(visible(f"INFRA_ERROR: {type(exc).__name__}: {exc}"), markup=False, highlight=False)
        sys.exit(ExitCode.BLOCKED)


if __name__ == "__main__":
    main()
