"""docs/usage.md's command list names every command and every option the CLI has (and every
schema ``skill-eval schema`` prints), so a new one cannot ship undocumented."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from producer.commands.cli import app
from producer.corpus.published import published_schemas

USAGE = Path(__file__).resolve().parent.parent / "docs" / "usage.md"
SHARED = {"--help", "--store", "--broker"}
"""Options every stored-data command has (documented once, under Configuration)."""


def command_list() -> str:
    text = USAGE.read_text(encoding="utf-8")
    section = text[text.index("## Commands") :]
    return re.search(r"```\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def test_the_command_list_names_every_command_and_its_options() -> None:
    listed = command_list()
    usages = re.split(r"\n(?=skill-eval )", listed)
    missing = []
    for name, command in typer.main.get_command(app).commands.items():  # type: ignore[attr-defined]
        text = " ".join(u for u in usages if u.startswith(f"skill-eval {name} "))
        if not text:
            missing.append(name)
            continue
        for param in command.params:
            names = [o for o in param.opts if o.startswith("--")][:1] + list(param.secondary_opts)
            for flag in names:  # an alias (--runs for --epochs) is left to --help
                if flag not in SHARED and flag not in text:
                    missing.append(f"{name} {flag}")
    assert not missing, missing


def test_the_command_list_names_every_schema() -> None:
    line = next(line for line in command_list().splitlines() if line.startswith("skill-eval schema "))
    assert all(name in line for name in published_schemas()), line
