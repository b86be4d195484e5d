"""Report file names stay writable however long a model or executor name is: a ``cmd:`` executor's
whole command is its row name, and a file name over 255 bytes cannot be created."""

from __future__ import annotations

from pathlib import Path

from engine.store import open_store
from producer.results.reports import write_reports
from reducer.stream import reduce_run
from schemas.manifest import RunManifest
from tests.test_reducer import bundle, graded, plan_for

LONG = "cmd:python3 -c '" + "print(1); " * 300 + "'"  # about 3 KB


def test_a_3kb_row_name_gives_short_distinct_transcript_names(tmp_path: Path) -> None:
    models = (LONG + "a", LONG + "b")  # same long prefix, different ends
    plan = plan_for([bundle("s", (1, 1))], models=models)
    outcomes = {s.shard_id: graded(s, [False]) for s in plan.shards}
    result = reduce_run(plan, outcomes)
    written = write_reports(result, RunManifest(plan=plan, snapshots={}), open_store(str(tmp_path / "st")), tmp_path)
    transcripts = [p for p in written if p.name.endswith("-transcript.txt")]
    assert len(transcripts) == 4 and all(p.is_file() for p in transcripts)
    assert len({p.name for p in transcripts}) == 4
    assert all(len(p.name.encode()) < 255 for p in written)


def test_a_short_name_keeps_its_readable_slug() -> None:
    from reducer.file_names import file_slug

    assert file_slug("openai/exec-b") == "openai_exec-b"
    assert file_slug(LONG).startswith("cmd_python3_-c_print_1_")
    assert file_slug(LONG) != file_slug(LONG + " ")


def test_two_models_with_one_readable_slug_keep_their_own_transcripts(tmp_path: Path) -> None:
    plan = plan_for([bundle("s", (1, 1))], models=("org/exec", "org_exec"))  # both slug to org_exec
    outcomes = {s.shard_id: graded(s, [False]) for s in plan.shards}
    written = write_reports(
        reduce_run(plan, outcomes), RunManifest(plan=plan, snapshots={}), open_store(str(tmp_path / "st")), tmp_path
    )
    transcripts = [p for p in written if p.name.endswith("-transcript.txt")]
    assert len({p.name for p in transcripts}) == len(transcripts) == 4  # none overwrote another
    assert any("-org_exec-e" in p.name for p in transcripts)  # the first keeps its readable name
