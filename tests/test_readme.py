"""The README's commands and example, taken from the README itself and run as written."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, git

README = (ROOT / "README.md").read_text(encoding="utf-8")
EXE = Path(sys.executable).parent / "skill-eval"


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end >= 0 else len(README)]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.DOTALL)


def commands(block: str) -> list[list[str]]:
    """Each command of a shell block: continuation lines joined, comments dropped, ~ expanded later."""
    joined = block.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in joined.splitlines() if shlex.split(line, comments=True)]


@pytest.fixture
def my_skills(tmp_path: Path) -> Path:
    """A user's skill repo holding the README's corpus example, as the README describes it."""
    repo = tmp_path / "my-skills"
    (repo / "skills" / "release-note").mkdir(parents=True)
    (repo / "skills" / "release-note" / "SKILL.md").write_text(
        "---\nname: release-note\ndescription: Record a change in CHANGELOG.md.\n---\n"
        "Read CHANGELOG.md, then add one bullet under ## Unreleased.\n"
    )
    (repo / "CHANGELOG.md").write_text("# Changelog\n\n## Unreleased\n\n## 1.0.0\n\n- First release.\n")
    (repo / "evals").mkdir()
    (example,) = blocks(section("Write a corpus"), "json")
    (repo / "evals" / f"{json.loads(example)['skill_name']}.evals.json").write_text(example)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "skills")
    return repo


def run_as_written(argv: list[str], repo: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """A README command with `skill-eval` the installed script and the README's repo path this test's."""
    assert argv[0] == "skill-eval", argv
    args = [str(repo) if a == "~/src/my-skills" else a for a in argv[1:]]
    env = {**os.environ, "SKILL_EVAL_RUN_LOG": str(repo.parent / "runs.log")}  # not the user's run log
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout, env=env)


def test_the_corpus_example_validates_and_plans(my_skills: Path) -> None:
    validate, dry_run = commands(blocks(section("Write a corpus"), "sh")[0])
    result = run_as_written(validate, my_skills, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK evals/release-note.evals.json: 2 cases, 3 assertions" in result.stdout
    result = run_as_written(dry_run, my_skills, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BLOCKED" not in result.stdout and "release-note" in result.stdout


def test_your_own_repo_offline_runs_and_passes_judge_calibration(my_skills: Path, tmp_path: Path) -> None:
    server_cmd, run_cmd, _kill = commands(blocks(section("Your own repo, offline"), "sh")[0])
    assert server_cmd[:3] == [".venv/bin/python", "-m", "testkit.offline_server"] and server_cmd[-1] == "&"
    flags = list(server_cmd[3:-1])
    port = flags.index("--port")
    flags[port + 1] = "0"  # a free port for the test; the URL it prints replaces the README's
    server = subprocess.Popen(
        [sys.executable, "-m", "testkit.offline_server", *flags], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        argv = [url if a == "http://127.0.0.1:8080/v1" else a for a in run_cmd]
        result = run_as_written([*argv, "--out", str(tmp_path / "reports")], my_skills, timeout=300)
    finally:
        server.kill()
        server.wait(10)
        if server.stdout is not None:
            server.stdout.close()
    output = result.stdout + result.stderr
    assert "failed calibration" not in output
    assert "result: 3/3 (100.0%)" in output
    assert result.returncode == 0, output


def test_make_install_puts_the_command_on_path(tmp_path: Path) -> None:
    install = commands(blocks(section("Quick start"), "sh")[1])[0]
    assert install == ["make", "install"]
    bindir = tmp_path / "bin"
    # `-o setup`: the checkout is set up already; the install step alone is tested.
    made = subprocess.run(
        ["make", "-s", "-o", "setup", "install", f"BINDIR={bindir}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    assert f"installed: {bindir}/skill-eval" in made.stdout
    assert "is not on PATH" in made.stdout  # it says how to reach it
    found = shutil.which("skill-eval", path=f"{bindir}:/usr/bin:/bin")
    assert found == str(bindir / "skill-eval")
    version = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("skill-eval "), version.stderr


def test_the_readme_stays_a_front_door() -> None:
    assert len(README.splitlines()) < 250
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        assert (ROOT / target).exists(), target
    # The README's test command is the one CI runs.
    assert "make test" in blocks(section("Quick start"), "sh")[0]
    assert re.search(r"^make test\b", (ROOT / ".ci" / "run").read_text(), re.MULTILINE)


def test_every_module_the_makefile_runs_exists() -> None:
    """`make demo-<harness>` and the others run `python -m <module>`: a module moved to another room
    must take its targets along (a fresh clone's `make demo-gemini-cli` once named the old path)."""
    import importlib.util

    modules = re.findall(r"\$\(BIN\)/python -m ([\w.]+)", (ROOT / "Makefile").read_text())
    assert "producer.commands.demo" in modules
    assert [m for m in modules if importlib.util.find_spec(m) is None] == []
