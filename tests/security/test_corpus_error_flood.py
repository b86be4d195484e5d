"""A corpus built to fail everywhere: every violation of a file is reported in one pass, but at
most a screenful of them, the rest counted, so a hostile corpus cannot flood the terminal or a
report with hundreds of thousands of lines."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from producer.commands.cli import app
from producer.corpus.rules import MAX_REPORTED_VIOLATIONS
from tests.security.harness import case, make_repo

SKILL = "flood"


def test_twenty_thousand_bad_cases_print_a_screenful_and_a_count(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SKILL, [case(1, "p", ["runs git status first"])], commit=False)
    cases = [
        {"id": i, "prompt": "p", "expected_output": "e", "files": ["README.md"], "assertions": ["short"]}
        for i in range(20_000)
    ]
    (repo / "evals" / f"{SKILL}.evals.json").write_text(json.dumps({"skill_name": SKILL, "evals": cases}))
    result = CliRunner().invoke(app, ["validate", SKILL, "--repo", str(repo)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("BLOCKED_BAD_CORPUS")]
    assert len(lines) == MAX_REPORTED_VIOLATIONS + 1
    assert lines[0].startswith(f"BLOCKED_BAD_CORPUS: evals/{SKILL}.evals.json: $.evals[0].assertions[0]:")
    assert lines[-1] == (
        f"BLOCKED_BAD_CORPUS: evals/{SKILL}.evals.json: $: "
        f"and {20_000 - MAX_REPORTED_VIOLATIONS} more violations not listed"
    )
