"""A report never claims more than the store holds: shards with no terminal record (lost, or still
running) are not graded, keep the verdict from PASS, and ``report`` says the result is partial."""

from __future__ import annotations

from pathlib import Path

from engine.records import put_run_end
from engine.store import open_store
from reducer.stream import StreamReducer, reduce_run
from reducer.summary import render_complete_block
from schemas.manifest import outcome_key, result_key
from schemas.report import UNFINISHED, RunResult
from schemas.run_end import RunEnd
from schemas.shard_outcome import outcome_line_of
from schemas.status import ExitCode, Verdict
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, git_init, new_repo, write_skill
from tests.test_e2e_run import DUO, DUO_RULES, ran, use
from tests.test_reducer import bundle, graded, plan_for


def _all_pass_but_one_missing() -> tuple[RunResult, RunResult]:
    """(full reduce, streamed reduce) of an 8-case corpus x 2 epochs whose every shard passed but one
    shard that has no record at all."""
    plan = plan_for([bundle("s", (2,) * 8)], epochs=2)
    outcomes = {s.shard_id: graded(s, [True, True]) for s in plan.shards[1:]}
    full = reduce_run(plan, outcomes)
    streamed = StreamReducer(plan.model_copy(update={"shards": ()}))
    for o in outcomes.values():
        streamed.add(outcome_line_of(o))
    return full, streamed.result()


def test_a_run_missing_one_shard_is_not_a_pass_and_says_the_shard_is_not_graded() -> None:
    for result in _all_pass_but_one_missing():
        skill = result.skills[0]
        assert result.verdict is Verdict.WARN
        assert (skill.unfinished, skill.not_graded, skill.shard_count) == (1, 1, 16)
        assert skill.infra[UNFINISHED] == 1
        assert skill.behavioural.passed == skill.behavioural.total == 30  # the graded ones, as they are
        assert not any("all corpora graded" in r for r in result.reasons)
        assert any(f"1/16 shards not graded, {UNFINISHED}" in r for r in result.reasons)
        block = render_complete_block(result, [])
        # Not ended is no infra failure, and the block does not present itself as a finished run's.
        assert block.splitlines()[0] == "SKILL-EVAL PARTIAL (1 of 16 shards not ended: still running or lost)"
        assert "not graded (infra): none; not ended: 1; blocked: 0" in block
        assert "SKILL-EVAL COMPLETE" not in block
        assert "verdict: PASS" not in block


def test_the_full_and_the_streamed_reduce_count_a_missing_shard_alike() -> None:
    full, streamed = _all_pass_but_one_missing()
    a, b = full.skills[0], streamed.skills[0]
    assert (a.unfinished, a.not_graded, a.infra, a.inconclusive) == (
        b.unfinished,
        b.not_graded,
        b.infra,
        b.inconclusive,
    )
    assert (full.verdict, full.reasons) == (streamed.verdict, streamed.reasons)


def test_missing_shards_count_in_the_inconclusive_rule() -> None:
    plan = plan_for([bundle("s", (2,) * 4)])
    outcomes = {s.shard_id: graded(s, [True, True]) for s in plan.shards[2:]}  # 2 of 4 never ended
    result = reduce_run(plan, outcomes)
    skill = result.skills[0]
    assert skill.inconclusive and skill.headline.startswith("INCONCLUSIVE (2/4 shards not graded")
    assert result.verdict is Verdict.WARN


def test_an_inconclusive_corpus_with_shards_not_ended_says_so_in_one_reason() -> None:
    """The INCONCLUSIVE headline counts the shards not finished: a second reason saying it again
    (``2/4 shards not graded, missing or still running``) is left out."""
    plan = plan_for([bundle("s", (2,) * 4)])
    result = reduce_run(plan, {s.shard_id: graded(s, [True, True]) for s in plan.shards[2:]})
    about = [r for r in result.reasons if "shards not graded" in r]
    assert about == ["s (current): INCONCLUSIVE (2/4 shards not graded — 2 not finished)"], result.reasons


def test_a_complete_run_keeps_its_infra_tally_and_its_pass() -> None:
    plan = plan_for([bundle("s", (2,) * 4)])
    result = reduce_run(plan, {s.shard_id: graded(s, [True, True]) for s in plan.shards})
    assert result.verdict is Verdict.PASS
    assert result.skills[0].unfinished == 0 and UNFINISHED not in result.skills[0].infra
    assert render_complete_block(result, []).splitlines()[0] == "SKILL-EVAL COMPLETE"


def test_report_on_a_run_whose_store_lacks_a_shard_says_partial_and_does_not_pass(tmp_path: Path) -> None:
    with OfflineModelServer({"rules": []}) as server:
        env = Env(tmp_path / "e2e", server.base_url)
        env.base.mkdir()
        repo = new_repo(tmp_path / "repo")
        write_skill(repo, "duo", DUO)
        git_init(repo)
        use(server, DUO_RULES, [ran("duo-one-a"), ran("duo-one-b"), ran("duo-two-a")])
        run = env.cli(*env.run_args(repo, "duo"))
        assert run.code == 0, run.stdout + run.stderr
        store = open_store(str(env.store))
        shard = sorted(store.list(f"runs/{run.run_id}/outcomes/"))[0]
        assert shard == outcome_key(run.run_id, shard.rsplit("/", 1)[1].removesuffix(".json"))
        assert store.exists(result_key(run.run_id))  # the run's own reduce stored its result
        # As the store reads mid-run: one shard ended, the other not yet, nothing reduced.
        Path(env.store, shard).unlink()  # the local store's key is the file's path under its root
        Path(env.store, result_key(run.run_id)).unlink()
        assert not store.exists(shard)

        again = env.cli("report", run.run_id, "--store", str(env.store), "--out", str(env.base / "again"))
        # A partial report is not the run's result: nothing reads it as done, or reuses it.
        assert not store.exists(result_key(run.run_id))
        status = env.cli("status", run.run_id, "--store", str(env.store))
        assert status.stdout.startswith(f"run {run.run_id}: not done (from the store)"), status.stdout

    assert again.code == ExitCode.WARN, again.stdout + again.stderr
    assert "partial: shards not ended count as not graded, and the verdict cannot be PASS" in again.stdout
    assert again.stdout.count("1 of 2 shards") == 1  # said once, in the block's header
    assert "verdict: WARN" in again.stdout and "verdict: PASS" not in again.stdout
    assert "all corpora graded" not in again.stdout
    assert "SKILL-EVAL PARTIAL (1 of 2 shards not ended: still running or lost)" in again.stdout
    assert "SKILL-EVAL COMPLETE" not in again.stdout
    assert "not graded (infra): none; not ended: 1;" in again.stdout
    # No transcript stands in for the shard that has not ended: there is none to show yet.
    assert not list((env.base / "again").glob("*-transcript.txt"))
    (report,) = (env.base / "again").glob("*.md")
    infra = report.read_text(encoding="utf-8").split("### Not graded (infra)")[1].split("###")[0]
    assert UNFINISHED not in infra
    assert "### Not ended\n\n- 1 shard with no terminal record yet: still running or lost" in report.read_text()
    (page,) = (env.base / "again").glob("*.html")
    assert "Not graded (infra): none; not ended (still running or lost): 1;" in page.read_text(encoding="utf-8")
    assert "failing-case transcript" not in again.stdout

    # Its command stopped and recorded the run interrupted: nothing runs the shard, and the header says so.
    put_run_end(store, RunEnd(run_id=run.run_id, how="interrupted", reason="SIGTERM before the run finished"))
    stopped = env.cli("report", run.run_id, "--store", str(env.store), "--out", str(env.base / "stopped"))
    assert stopped.code == ExitCode.WARN, stopped.stdout + stopped.stderr
    assert "SKILL-EVAL PARTIAL (1 of 2 shards not ended: the run was interrupted)" in stopped.stdout
    assert "still running" not in stopped.stdout.split("SKILL-EVAL PARTIAL")[1].splitlines()[0]
