"""End to end: ``skill-eval run`` through real Redis, real Celery workers, bwrap and the offline server.

Each test builds a small git repo and a scripted scenario, runs the real command as a
subprocess on the embedded one-host cluster, and checks what a user sees: the exit code,
the COMPLETE block, the report files, the run-log line. Few, rich runs: each costs a
cluster start.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import (
    RUN_ID_RE,
    Env,
    case,
    current,
    git_init,
    leftover_processes,
    never_ran,
    new_repo,
    ran,
    reports,
    scenario,
    shell_rule,
    write_skill,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer({"rules": []}) as s:
        yield s


@pytest.fixture
def env(tmp_path: Path, server: OfflineModelServer) -> Iterator[Env]:
    e = Env(tmp_path / "e2e", server.base_url)
    e.base.mkdir()
    yield e
    # Nothing the runs started may outlive them: the cluster's redis dir and worker log live in tmp.
    assert leftover_processes(str(e.tmp)) == []


def use(server: OfflineModelServer, rules: list[dict], judge: list[dict]) -> None:  # type: ignore[type-arg]
    server.set_scenario(scenario(rules, judge))


# --- (a) mixed pass/fail, (b) a blocked fixture, (f) report and status -------------------------
ALPHA = [
    case(1, "Alpha one: say hello twice.", [
        "The agent runs echo alpha-one-a in the shell",
        "The agent runs echo alpha-one-b in the shell",
    ]),
    case(2, "Alpha two: say three things.", [
        "The agent runs echo alpha-two-a in the shell",
        "The agent runs echo alpha-two-b in the shell",
        "The agent runs echo alpha-two-c in the shell",
    ]),
    case(3, "Alpha three: write through the link.", [
        "The agent runs echo alpha-three-a in the shell",
    ], fixtures=[{"path": "linked/evil.txt", "content": "escaped\n"}]),
    case(4, "Alpha four: say one thing, delete nothing.", [
        "The agent runs echo alpha-four-a in the shell",
        "The agent never runs rm -rf alpha-four-z anywhere",
    ]),
]  # fmt: skip
ALPHA_RULES = [
    shell_rule("Alpha one:", ["echo alpha-one-a", "echo alpha-one-b"]),
    shell_rule("Alpha two:", ["echo alpha-two-a"]),
    shell_rule("Alpha three:", ["echo alpha-three-a"]),
    shell_rule("Alpha four:", ["echo alpha-four-a"]),
]
ALPHA_JUDGE = [
    *(ran(m) for m in ("alpha-one-a", "alpha-one-b", "alpha-two-a", "alpha-two-b", "alpha-two-c", "alpha-three-a")),
    ran("alpha-four-a"),
    never_ran("rm -rf alpha-four-z"),
]


def alpha_repo(base: Path, outside: Path) -> Path:
    repo = new_repo(base / "repo")
    write_skill(repo, "alpha", ALPHA)
    outside.mkdir()
    # A symlink that exists in the repo and points outside it: corpus validation sees only the
    # literal path "linked/evil.txt"; the workspace must resolve it and refuse.
    (repo / "linked").symlink_to(outside)
    git_init(repo)
    return repo


def test_a_mixed_corpus_reports_the_exact_headline_blocks_the_unsafe_fixture_and_can_be_re_reported(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    outside = tmp_path / "outside-the-repo"
    repo = alpha_repo(tmp_path, outside)
    use(server, ALPHA_RULES, ALPHA_JUDGE)

    res = env.run(repo, "alpha", "--fail-under", "0.8")

    # 5 of 7 assertions in the three graded cases; the blocked case (1 of 4 = 25%, not more) is
    # listed apart, so the corpus is graded and the rate is below --fail-under: FAIL, exit 1.
    assert res.code == 1, res.stdout + res.stderr
    assert res.field("verdict:") == ["FAIL"]
    assert "result: 5/7 (71.4%)" in res.stdout
    assert "blocked: 1" in res.stdout
    assert "reason: alpha: behavioural pass rate 5/7 (71.4%) is below 80%" in res.stdout
    run_id = res.run_id
    assert RUN_ID_RE.match(run_id)
    assert not any(outside.iterdir()), "a fixture was written outside the workspace"

    doc, md = reports(env.out, "alpha", run_id)
    cur = current(doc)
    states = {r["case_id"]: r["state"] for r in cur["runs"]}
    assert states == {1: "graded", 2: "graded", 3: "blocked", 4: "graded"}
    assert cur["behavioural"]["passed"] == 5 and cur["behavioural"]["total"] == 7
    assert not cur["inconclusive"]
    assert cur["infra"] == {"executor-failed": 0, "grader-dispatch-failed": 0, "grader-malformed": 0}
    blocked = cur["blocked"][0]
    assert blocked["case_id"] == 3 and blocked["detail"].startswith("BLOCKED_BAD_FIXTURE")
    assert "escapes the workspace" in blocked["detail"]
    # Raw judge arrays and template hashes are in the machine record.
    graded = [r for r in cur["runs"] if r["state"] == "graded"]
    assert all(r["judges"] and r["judges"][0]["raw_answers"] for r in graded)
    assert set(doc["template_hashes"]) == {"executor", "grader"}
    assert doc["calibration"] == {"openai/judge": "ok"}
    assert doc["meta"]["sandbox"] == "bwrap" and cur["sandbox_modes"] == ["bwrap"]

    assert "## current: 5/7 (71.4%)" in md
    assert "- **FAIL** The agent runs echo alpha-two-b in the shell" in md
    assert "BLOCKED_BAD_FIXTURE" in md

    # Transcripts only for the failing case and the blocked one.
    names = sorted(p.name for p in env.out.glob("*-transcript.txt"))
    assert names == [f"skill-eval-alpha-{run_id}-case{i}-transcript.txt" for i in (2, 3)]
    assert "echo alpha-two-a" in (env.out / names[0]).read_text()

    # One 13-field run-log line.
    lines = env.run_log.read_text().splitlines()
    assert len(lines) == 1
    fields = lines[0].split("\t")
    assert len(fields) == 13
    assert fields[1:3] == ["skill-eval", "repo"] and fields[5] == "FAIL" and fields[7] == "4-cases"
    assert fields[9] == "main" and re.fullmatch(r"[0-9a-f]{7}", fields[10])

    # (f) status from the store, and report re-reduced from stored verdicts into a fresh folder.
    status = env.cli("status", run_id, "--json", "--store", str(env.store))
    assert status.code == 0, status.stderr
    doc_status = json.loads(status.stdout)
    assert doc_status["total"] == 4 and doc_status["done"] is True
    assert doc_status["states"]["graded"] == 3 and doc_status["states"]["blocked"] == 1

    again = env.cli("report", run_id, "--store", str(env.store), "--out", str(env.base / "again"))
    assert again.code == 1, again.stdout + again.stderr
    assert "result: 5/7 (71.4%)" in again.stdout
    doc2, _ = reports(env.base / "again", "alpha", run_id)
    assert current(doc2)["behavioural"] == cur["behavioural"]
