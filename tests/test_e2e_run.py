"""End to end: ``skill-eval run`` through real Redis, real Celery workers, bwrap and the offline server.

Each test builds a small git repo and a scripted scenario, runs the real command as a
subprocess on the embedded one-host cluster, and checks what a user sees: the exit code,
the COMPLETE block, the report files, the run-log line. Few, rich runs: each costs a
cluster start.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import (
    RUN_ID_RE,
    Env,
    alive,
    case,
    current,
    descendants,
    git_init,
    leftover_processes,
    never_ran,
    new_repo,
    processes_using,
    ran,
    reports,
    scenario,
    shell_rule,
    write_skill,
)
from tests.harness_e2e import model_fixtures

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(400),
]


server, env = model_fixtures({"rules": []})


def _is_worker(cmdline: str) -> bool:
    """The embedded worker: started ahead by the entry point (``-m worker.prestart``, which then
    boots its node in-process) or, when it was not, spawned as ``-m worker.boot``."""
    return "-m worker.prestart" in cmdline or "-m worker.boot" in cmdline


def use(server: OfflineModelServer, rules: list[dict], judge: list[dict]) -> None:  # type: ignore[type-arg]
    server.set_scenario(scenario(rules, judge))


# --- (a) mixed pass/fail, (b) a blocked fixture, (f) report and status -------------------------
ALPHA = [
    case(
        1,
        "Alpha one: say hello twice.",
        [
            "The agent runs echo alpha-one-a in the shell",
            "The agent runs echo alpha-one-b in the shell",
        ],
    ),
    case(
        2,
        "Alpha two: say three things.",
        [
            "The agent runs echo alpha-two-a in the shell",
            "The agent runs echo alpha-two-b in the shell",
            "The agent runs echo alpha-two-c in the shell",
        ],
    ),
    case(
        3,
        "Alpha three: write through the link.",
        [
            "The agent runs echo alpha-three-a in the shell",
        ],
        fixtures=[{"path": "linked/evil.txt", "content": "escaped\n"}],
    ),
    case(
        4,
        "Alpha four: say one thing, delete nothing.",
        [
            "The agent runs echo alpha-four-a in the shell",
            "The agent never runs rm -rf alpha-four-z anywhere",
        ],
    ),
]
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
    assert "reason: alpha: behavioural pass rate 5/7 (71.4%) is below the threshold 0.8 (--fail-under)" in res.stdout
    run_id = res.run_id
    assert RUN_ID_RE.match(run_id)
    assert not any(outside.iterdir()), "a fixture was written outside the workspace"

    doc, md = reports(env.out, "alpha", run_id)
    cur = current(doc)
    states = {r["case_id"]: r["state"] for r in cur["runs"]}
    assert states == {1: "graded", 2: "graded", 3: "blocked", 4: "graded"}
    assert cur["behavioural"]["passed"] == 5 and cur["behavioural"]["total"] == 7
    assert not cur["inconclusive"]
    assert cur["infra"] == {
        "budget-exhausted": 0,
        "executor-failed": 0,
        "grader-dispatch-failed": 0,
        "grader-malformed": 0,
    }
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


# --- (c) infra failures -> INCONCLUSIVE, (e) --all-evals with the bundle-key skip ---------------
STEADY = [
    case(1, "Steady one: greet.", ["The agent runs echo steady-one in the shell"]),
    case(2, "Steady two: greet again.", ["The agent runs echo steady-two in the shell"]),
]
BETA = [
    case(1, "Beta one: fine.", ["The agent runs echo beta-one in the shell"]),
    case(2, "Beta two: the executor model breaks.", ["The agent runs echo beta-two in the shell"]),
    case(3, "Beta three: the judge rambles.", ["The agent runs echo beta-prose-marker in the shell"]),
    case(4, "Beta four: the judge's reply is cut off.", ["The agent runs echo beta-cut-marker in the shell"]),
]
INFRA_RULES = [
    shell_rule("Steady one:", ["echo steady-one"]),
    shell_rule("Steady two:", ["echo steady-two"]),
    shell_rule("Beta one:", ["echo beta-one"]),
    # The executor's model answers 500 on every attempt: executor-failed.
    {"name": "beta-two 500", "tools": True, "contains": "Beta two:", "replies": [{"status": 500}]},
    shell_rule("Beta three:", ["echo beta-prose-marker"]),
    shell_rule("Beta four:", ["echo beta-cut-marker"]),
    # The judge answers prose, also when asked again: grader-malformed.
    {"name": "judge prose", "tools": False, "contains": "beta-prose-marker", "replies": [{"text": "Looks fine."}]},
    # The judge's HTTP body is cut off on every attempt: grader-dispatch-failed.
    {
        "name": "judge cut",
        "tools": False,
        "contains": "beta-cut-marker",
        "judge": True,
        "replies": [{"malformed": True}],
    },
]
INFRA_JUDGE = [
    ran(m) for m in ("steady-one", "steady-two", "beta-one", "beta-two", "beta-prose-marker", "beta-cut-marker")
]
HEALED_BETA = [shell_rule("Beta two:", ["echo beta-two"])]


def test_c_e_infra_failures_turn_a_corpus_inconclusive_and_all_evals_skips_what_is_already_reported(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "steady", STEADY)
    write_skill(repo, "beta", BETA)
    write_skill(repo, "gamma", STEADY[:1])  # one case: schema v1 needs two, so the corpus is skipped
    git_init(repo)
    use(server, INFRA_RULES, INFRA_JUDGE)

    first = env.run(repo, "--all-evals")

    # beta: 3 of 4 cases not graded (> 25%) -> INCONCLUSIVE, tallied by kind; WARN, exit 3.
    assert first.code == 3, first.stdout + first.stderr
    assert first.field("verdict:") == ["WARN"]
    assert "skill: beta [current]  cases: 4  result: INCONCLUSIVE (3/4 shards not graded — infra)" in first.stdout
    assert "not graded (infra): executor-failed 1, grader-dispatch-failed 1, grader-malformed 1" in first.stdout
    assert "skill: steady [current]  cases: 2  result: 2/2 (100.0%)" in first.stdout
    assert "AGGREGATE: INCONCLUSIVE (1/2 corpora not trustworthy)" in first.stdout
    assert first.field("skipped:") == [
        "BLOCKED_BAD_CORPUS: evals/gamma.evals.json: $.evals: has 1 case; at least 2 are required"
    ]
    beta, beta_md = reports(env.out, "beta", first.run_id)
    cur = current(beta)
    assert cur["inconclusive"] and cur["behavioural"]["passed"] == 1 and cur["behavioural"]["total"] == 1
    by_case = {r["case_id"]: r for r in cur["runs"]}
    assert [by_case[i]["state"] for i in (1, 2, 3, 4)] == [
        "graded",
        "executor-failed",
        "grader-malformed",
        "grader-dispatch-failed",
    ]
    assert by_case[3]["judges"][0]["raw_answers"][:2] == ["Looks fine.", "Looks fine."]  # first try and re-ask
    assert "- executor-failed: 1" in beta_md and "- grader-malformed: 1" in beta_md
    assert "## current: INCONCLUSIVE (3/4 shards not graded — infra)" in beta_md
    transcripts = {p.name for p in env.out.glob(f"*-{first.run_id}-*-transcript.txt")}
    assert transcripts == {f"skill-eval-beta-{first.run_id}-case{i}-transcript.txt" for i in (2, 3, 4)}

    # The infra storm is over. A conclusive report is kept; an INCONCLUSIVE one is re-run.
    use(server, [r for r in INFRA_RULES if r["name"].startswith(("Steady", "Beta"))] + HEALED_BETA, INFRA_JUDGE)
    second = env.run(repo, "--all-evals")
    assert "skipped evals/steady.evals.json: bundle key" in second.stdout
    assert "skill: beta [current]  cases: 4  result: 4/4 (100.0%)" in second.stdout, second.stdout
    assert "skill: steady" not in second.stdout
    assert second.code == 3, second.stdout + second.stderr  # the bad corpus is still skipped: WARN

    # Unchanged corpora with conclusive reports: nothing is run, no cluster is started.
    third = env.run(repo, "--all-evals")
    assert "skipped evals/steady.evals.json: bundle key" in third.stdout
    assert "skipped evals/beta.evals.json: bundle key" in third.stdout
    assert "skill: " not in third.stdout, third.stdout
    assert third.code == 3 and third.field("skipped:")
    assert not third.field("run:")  # nothing ran: no run id, no report, no run-log line

    # Editing one SKILL.md (uncommitted: the working tree is graded) re-runs that corpus alone.
    skill_md = repo / "skills" / "steady" / "SKILL.md"
    skill_md.write_text(skill_md.read_text() + "\nAlways greet politely.\n")
    fourth = env.run(repo, "--all-evals")
    assert "skipped evals/beta.evals.json: bundle key" in fourth.stdout
    assert "skipped evals/steady.evals.json" not in fourth.stdout
    assert [line.split("  ")[0] for line in fourth.stdout.splitlines() if line.startswith("skill: ")] == [
        "skill: steady [current]"
    ]

    # --force re-runs every corpus.
    forced = env.run(repo, "--all-evals", "--force")
    assert "bundle key" not in forced.stdout
    assert {line.split(" [")[0] for line in forced.stdout.splitlines() if line.startswith("skill: ")} == {
        "skill: steady",
        "skill: beta",
    }
    assert len(env.run_log.read_text().splitlines()) == 4  # the run with nothing to run logged nothing


# --- (d) several models and epochs ---------------------------------------------------------------
DUO = [
    case(
        1,
        "Duo one: two greetings.",
        [
            "The agent runs echo duo-one-a in the shell",
            "The agent runs echo duo-one-b in the shell",
        ],
    ),
    case(2, "Duo two: one greeting.", ["The agent runs echo duo-two-a in the shell"]),
]
DUO_RULES = [
    shell_rule("Duo one:", ["echo duo-one-a", "echo duo-one-b"], model="exec-a"),
    shell_rule("Duo one:", ["echo duo-one-a"], model="exec-b"),  # B forgets the second greeting
    shell_rule("Duo two:", ["echo duo-two-a"]),
]


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def test_d_several_models_and_epochs_get_per_model_tables_a_matrix_pass_at_k_and_a_leaderboard(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "duo", DUO)
    git_init(repo)
    use(server, DUO_RULES, [ran("duo-one-a"), ran("duo-one-b"), ran("duo-two-a")])

    args = env.run_args(repo, "duo", "--epochs", "2", models=("openai/exec-a", "openai/exec-b"))
    proc = env.start(*args)
    # While it runs, its private redis-server and Celery worker process are there to be found ...
    seen: dict[int, str] = {}
    cluster: dict[int, str] = {}  # the command's own children: redis-server and the worker process
    deadline = time.monotonic() + 90
    while proc.poll() is None and time.monotonic() < deadline:
        seen |= descendants(proc.pid)
        cluster = {p: c for p, c in seen.items() if _parent(p) == proc.pid}
        if any("redis-server" in c for c in cluster.values()) and any(_is_worker(c) for c in cluster.values()):
            break
        time.sleep(0.1)
    # The teardown's detector sees them too: the cluster's own processes, that is (the per-command
    # sandboxes the workers start are short-lived and run with a cleared environment, nothing of
    # the test's TMPDIR, and any of them caught by the loop above may be gone by now). The worker
    # process starts with the command, so the loop can catch redis-server in the instant between
    # its exec, which rewrites its environment block, and opening its files in the cluster's
    # folder; the detector runs at teardown, long after. So scan until it sees every cluster
    # process still alive after the scan (alive after, so alive during), for a few seconds at most.
    own = [p for p, c in cluster.items() if "redis-server" in c or _is_worker(c)]
    until = time.monotonic() + 10
    while True:
        under = processes_using(env.tmp)
        still_running = alive(own)
        if set(still_running) <= set(under) or time.monotonic() > until:
            break
        time.sleep(0.1)
    res = env.finish(proc, args)
    assert any("redis-server" in c for c in cluster.values()), seen
    assert still_running and set(still_running) <= set(under), (seen, under)
    # One worker process: shards run on its threads (sandboxed commands it forks come and go).
    assert sum(_is_worker(c) for c in cluster.values()) == 1, cluster
    # ... and once it has returned, none of them is left.
    assert alive(seen) == [] and leftover_processes(f"embedded-{proc.pid}@") == []

    # 2 cases x 2 models x 2 epochs = 8 shards, all graded: A 6/6, B 4/6 -> 10/12, below the
    # default threshold 1.0: FAIL, exit 1.
    assert res.code == 1, res.stdout + res.stderr
    assert "result: 10/12 (83.3%)  FAIL (below threshold 1.0)" in res.stdout
    assert "leaderboard (composite): openai/exec-a 100.0%, openai/exec-b 75.0%" in res.stdout
    doc, md = reports(env.out, "duo", res.run_id)
    cur = current(doc)
    assert len(cur["runs"]) == 8
    models = {m["model"]: m for m in cur["models"]}
    assert models["openai/exec-a"]["behavioural"]["passed"] == 6
    assert models["openai/exec-b"]["behavioural"]["passed"] == 4
    assert models["openai/exec-b"]["composite_mean"] == pytest.approx(0.75)  # case 1: 1/2, case 2: 1
    # Model-by-assertion matrix with pass@k and pass^k (k = 2 epochs; mean over the two models).
    assert "| 1 | The agent runs echo duo-one-b in the shell | 100.0% | 0.0% | 50.0% | 50.0% |" in md
    assert "| 2 | The agent runs echo duo-two-a in the shell | 100.0% | 100.0% | 100.0% | 100.0% |" in md
    rows = [line for line in md.splitlines() if line.startswith("| openai/exec-")]
    assert [r.split(" | ")[:2] for r in rows] == [
        ["| openai/exec-a", "6/6 (100.0%)"],
        ["| openai/exec-b", "4/6 (66.7%)"],
    ]
    # Several shards per case: transcripts are told apart by model and epoch; only B's case 1 failed.
    names = sorted(p.name for p in env.out.glob("*-transcript.txt"))
    assert names == [f"skill-eval-duo-{res.run_id}-case1-openai_exec-b-e{e}-transcript.txt" for e in (0, 1)]
    # One table per model.
    table_b = md.split("#### openai/exec-b\n", 1)[1]
    assert "| 1 | 0 | graded | 1/2 | 50.0% |" in table_b and "| 1 | 1 | graded | 1/2 | 50.0% |" in table_b


def test_a_terminated_run_stops_its_embedded_cluster(env: Env, server: OfflineModelServer, tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "duo", DUO)
    git_init(repo)
    slow = {"name": "slow", "tools": True, "replies": [{"delay_s": 2, "text": "(scripted) thinking slowly."}]}
    use(server, [slow], [])
    args = env.run_args(repo, "duo")
    proc = env.start(*args)
    seen: dict[int, str] = {}
    deadline = time.monotonic() + 90
    # Wait until the workers have taken shards (a model call arrived), then cancel like a CI job would.
    while proc.poll() is None and time.monotonic() < deadline and not server.requests():
        seen |= descendants(proc.pid)
        time.sleep(0.1)
    seen |= descendants(proc.pid)
    assert proc.poll() is None and any("redis-server" in c for c in seen.values()), seen
    proc.terminate()
    res = env.finish(proc, args, timeout_s=60)
    assert res.code == 128 + signal.SIGTERM, res.stderr
    assert alive(seen) == []
