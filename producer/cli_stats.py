"""Command-line pieces for baselines and statistics: the ``run`` options for a no-skill arm and
the comparison gates, and the ``assertions`` and ``export`` commands.

Kept apart from :mod:`producer.cli` so that module only declares and wires them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from schemas.errors import ConfigError
from schemas.shard import NO_SKILL

BaselineOpt = Annotated[
    str | None,
    typer.Option("--baseline", help="no-skill: also run every case with the skill absent (workspace and prompt)."),
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
    if baseline is not None and baseline != NO_SKILL:
        raise ConfigError(f"--baseline {baseline!r}: the only baseline is {NO_SKILL!r} (an old ref is --compare REF)")
    if require_uplift is not None and baseline != NO_SKILL:
        raise ConfigError("--require-uplift needs --baseline no-skill: the uplift is measured over no skill")
    if regression_alpha is not None and not compare:
        raise ConfigError("--regression-alpha needs --compare REF: a regression is a drop against an old ref")


def print_power(lines: Sequence[str], err: Console) -> None:
    for line in lines:
        err.print(line, markup=False, highlight=False)


def write_json(doc: object) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def out_path(value: Path | None, default: Path) -> Path:
    return value if value is not None else default
