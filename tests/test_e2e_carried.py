"""End to end: what ``run --all-evals`` concludes when a corpus is skipped for its earlier report,
and that every outcome of ``run`` ends with its ``verdict:`` line, a BLOCKED refusal's included.

A corpus whose bundle key already has a report is skipped: that report stands, so its verdict is
carried into the run's (a FAIL there fails the run again, however many times it is re-run), and a
run left with nothing to run writes nothing as if it had run.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from engine.redis_server import RedisServer
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, case, git_init, new_repo, ran, scenario, shell_rule, write_skill
from tests.harness_e2e import model_fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

server, env = model_fixtures({"rules": []})

RELEASE = [
    case(1, "Release one: note the change.", ["The agent runs echo release-one in the shell"]),
    case(2, "Release two: note the fix.", ["The agent runs echo release-two in the shell"]),
]
STEADY = [
    case(1, "Steady one: greet.", ["The agent runs echo steady-one in the shell"]),
    case(2, "Steady two: greet again.", ["The agent runs echo steady-two in the shell"]),
]
RULES = [
    shell_rule("Release one:", ["echo release-one"]),
    shell_rule("Release two:", ["echo something-else"]),  # its assertion fails: the corpus FAILs
    shell_rule("Steady one:", ["echo steady-one"]),
    shell_rule("Steady two:", ["echo steady-two"]),
]
JUDGE = [ran(m) for m in ("release-one", "release-two", "steady-one", "steady-two")]


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_rerun_skipping_a_failed_corpus_fails_again_and_writes_nothing_when_nothing_ran(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "release", RELEASE)
    git_init(repo)
    server.set_scenario(scenario(RULES, JUDGE))

    first = env.run(repo, "--all-evals")
    assert first.code == 1 and first.field("verdict:") == ["FAIL"], first.stdout + first.stderr
    earlier = env.out / f"skill-eval-release-{first.run_id}.json"
    assert earlier.exists()
    written, logged = files(env.out), env.run_log.read_text()

    # Nothing changed: the corpus is skipped, its earlier FAIL stands and decides the run again.
    again = env.run(repo, "--all-evals")
    assert again.code == 1, again.stdout + again.stderr
    assert f"already reported FAIL in {earlier} (--force re-runs it)" in again.stdout
    assert again.field("reason:") == [f"release: FAIL in its earlier report {earlier} (--force re-runs it)"]
    assert again.stdout.splitlines()[-1] == "verdict: FAIL"
    # No run happened: no run id, and no report, page, JUnit file or run-log line says one did.
    assert not again.field("run:"), again.stdout
    assert files(env.out) == written and env.run_log.read_text() == logged

    # A new corpus runs and passes; the skipped one's earlier FAIL still fails the run.
    write_skill(repo, "steady", STEADY)
    mixed = env.run(repo, "--all-evals")
    assert mixed.code == 1, mixed.stdout + mixed.stderr
    assert "skill: steady [current]  cases: 2  result: 2/2 (100.0%)  PASS" in mixed.stdout
    assert f"reason: release: FAIL in its earlier report {earlier} (--force re-runs it)" in mixed.stdout
    assert mixed.stdout.splitlines()[-1] == "verdict: FAIL"
    # The run's JUnit file fails as the run does: the carried FAIL is a failing testcase of its own.
    junit = (env.out / f"skill-eval-{mixed.run_id}.junit.xml").read_text()
    assert '<testsuite name="release[carried]" tests="1" failures="1"' in junit
    assert '<property name="verdict" value="FAIL"/>' in junit


def test_a_detached_rerun_with_nothing_to_run_prints_no_run_id_and_exits_with_the_carried_verdict(
    env: Env, server: OfflineModelServer, tmp_path: Path, broker: RedisServer
) -> None:
    """``run=$(skill-eval run --all-evals ... --detach | tail -1)`` must never capture a verdict line
    or a skipped corpus's line as a run id: with nothing submitted, stdout stays empty."""
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "release", RELEASE)
    git_init(repo)
    server.set_scenario(scenario(RULES, JUDGE))
    first = env.run(repo, "--all-evals")
    assert first.code == 1, first.stdout + first.stderr

    detached = env.run(repo, "--all-evals", "--detach", "--broker", broker.url)
    assert detached.code == 1, detached.stdout + detached.stderr
    assert detached.stdout == ""
    assert "skipped evals/release.evals.json: bundle key" in detached.stderr
    assert detached.stderr.strip().splitlines()[-1] == "verdict: FAIL"


def test_a_run_refused_by_its_model_check_ends_with_its_blocked_verdict(env: Env, tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "release", RELEASE)
    git_init(repo)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    args = list(env.run_args(repo, "release"))
    args[args.index("--api-base") + 1] = dead

    refused = env.cli(*args)

    assert refused.code == 2, refused.stdout + refused.stderr
    assert "BLOCKED_MODEL_UNAVAILABLE" in refused.stderr and "run: " in refused.stderr
    assert refused.stdout.splitlines()[-1] == "verdict: BLOCKED", refused.stdout
