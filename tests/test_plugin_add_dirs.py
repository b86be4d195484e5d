"""A plugin eval case's ``context.add_dirs``: folders of the case folder the agent may read. They
travel with the case and are in its workspace at their own path (the case folder itself never is);
a name that escapes the case folder, or leads through a link out of the repo, into version-control
data or to the suite's cases and graders, is refused by name before anything runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from producer.corpus.repo import Repo
from schemas.errors import BadCorpus, BadRepo
from testkit.offline_server import OfflineModelServer
from tests.model_support import server_fixtures
from tests.test_plugin_suite import FIXTURE, SUITE, execute
from worker.models.client import GatedModelClient

server, scripted, client = server_fixtures()

CASE = "oslo-rain"


def repo_with(tmp_path: Path, add_dirs: str, make: str = "") -> Path:
    repo = tmp_path / "plugin-weather"
    shutil.copytree(FIXTURE, repo)
    case = repo / "evals" / CASE
    (case / "fixtures" / "deep").mkdir(parents=True)
    (case / "fixtures" / "stations.csv").write_text("station,city\nblindern,Oslo\n")
    (case / "fixtures" / "deep" / "note.md").write_text("rain gauge calibrated\n")
    (case / "fixtures" / "empty.txt").write_text("")
    yaml = (case / "case.yaml").read_text()
    (case / "case.yaml").write_text(yaml.replace("execution:", f"context:\n  add_dirs: {add_dirs}\nexecution:"))
    if make:
        subprocess.run(["sh", "-c", make], cwd=case, check=True)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True)
    return repo


def test_an_add_dir_travels_with_its_case_and_the_agent_reads_it_in_the_sandbox(
    tmp_path: Path, client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    repo = repo_with(tmp_path, "[fixtures]")
    bundle = Repo(repo).load(SUITE)
    oslo = bundle.corpus.evals[0]
    at = f"evals/{CASE}/fixtures"
    assert [(f.path, f.content) for f in oslo.fixtures] == [
        (f"{at}/stations.csv", "station,city\nblindern,Oslo\n"),
        (f"{at}/deep/note.md", "rain gauge calibrated\n"),
    ]
    assert oslo.files == (f"{at}/stations.csv", f"{at}/deep/note.md")  # the agent is told where they are
    command = f"cat {at}/stations.csv; ls evals/{CASE}; ls evals/{CASE}/graders 2>&1 | head -1"
    scripted.set_scenario(
        {
            "rules": [
                {
                    "model": "scripted-exec",
                    "tools": True,
                    "replies": [
                        {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]},
                        {"text": "done"},
                    ],
                }
            ]
        }
    )
    trajectory = execute(client, repo, bundle, oslo.id, tmp_path)
    output = next(e.output for e in trajectory.events if e.kind == "tool_result")
    assert "blindern,Oslo" in output
    # Only the folder came back: not the case's case.yaml, nor its graders.
    assert "case.yaml" not in output and "No such file" in output


@pytest.mark.parametrize(
    ("add_dirs", "make", "error", "needle"),
    [
        ("[../sunny-day]", "", BadCorpus, "escapes the case folder"),
        ("[/etc]", "", BadCorpus, "escapes the case folder"),
        ("['.']", "", BadCorpus, "is the case folder itself"),
        ("[graders]", "", BadCorpus, "version-control data or the graders"),
        ("[fixtures/.git]", "", BadCorpus, "version-control data or the graders"),
        ("[missing]", "", BadCorpus, "is not a folder of the case folder"),
        ("[host]", "ln -s /etc host", BadRepo, "link out of the repo"),
        ("[other]", "ln -s ../sunny-day other", BadCorpus, "leads to the suite's cases or graders"),
        ("[fixtures]", "ln -s ../../sunny-day/graders/a-reply.md fixtures/peek.md", BadCorpus, "a link into the suite"),
        ("[many]", "mkdir many && for i in $(seq 1 120); do echo $i > many/$i.txt; done", BadCorpus, "more than 100"),
    ],
)
def test_a_bad_add_dir_is_refused_by_name(
    tmp_path: Path, add_dirs: str, make: str, error: type[Exception], needle: str
) -> None:
    repo = repo_with(tmp_path, add_dirs, make)
    with pytest.raises(error, match=needle) as info:
        Repo(repo).load(SUITE)
    if isinstance(info.value, BadCorpus):
        assert info.value.file == f"evals/{CASE}/case.yaml" and info.value.path.startswith("$.context.add_dirs")


def test_validate_and_a_dry_run_name_a_bad_add_dir_before_anything_runs(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, "[../sunny-day]")
    skill_eval = str(Path(sys.executable).parent / "skill-eval")
    args = ["run", "--repo", str(repo), "--all-evals", "--dry-run", "--model", "openai/x", "--judge", "openai/y"]
    for argv in (["validate", "--repo", str(repo), "--all-evals"], args):
        done = subprocess.run([skill_eval, *argv], capture_output=True, text=True, timeout=120)
        said = done.stdout + done.stderr
        assert done.returncode == 2, said
        assert "BLOCKED_BAD_CORPUS" in said and "$.context.add_dirs[0]" in said and "Traceback" not in said
