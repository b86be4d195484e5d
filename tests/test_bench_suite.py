"""`make bench`'s page: every benchmark's exit and output, a failed one marked, nothing invented."""

from __future__ import annotations

from pathlib import Path

from bench.suite import BENCHES, TAIL_LINES, Outcome, merged, render


def _outcome(name: str, code: int = 0, tail: list[str] | None = None, commit: str = "abc") -> Outcome:
    return Outcome(
        name, "<= 1 s", f".venv/bin/python bench/bench_{name}.py", code, 12.4, tail or [], "t", commit, "0.1 -> 0.2"
    )


def test_the_page_holds_each_benchmarks_own_output_and_marks_a_failure() -> None:
    ok = _outcome("alpha", tail=["noise"] * (TAIL_LINES - 1) + ["alpha median 0.8 s"])
    bad = _outcome("beta", code=3, tail=["Traceback: boom"])
    page = render([ok, bad], machine="2 cores")
    assert "| alpha | <= 1 s | ok | 12 | t, abc, 0.1 -> 0.2 | `.venv/bin/python bench/bench_alpha.py` |" in page
    assert "| beta | <= 1 s | FAILED (3) | 12 |" in page
    assert "alpha median 0.8 s" in page and "Traceback: boom" in page
    assert "do not edit by hand" in page


def test_running_some_again_replaces_only_those_and_keeps_the_suites_order() -> None:
    names = [b.name for b in BENCHES]
    kept = [_outcome(names[0], commit="old"), _outcome(names[2], commit="old")]
    new = [_outcome(names[2], commit="new"), _outcome(names[1], commit="new")]
    assert [(o.name, o.commit) for o in merged(kept, new)] == [(names[0], "old"), (names[1], "new"), (names[2], "new")]


def test_every_benchmark_the_suite_names_exists() -> None:
    bench = Path(__file__).resolve().parent.parent / "bench"
    assert [b.name for b in BENCHES if not (bench / b.args[0]).is_file()] == []
    assert len({b.name for b in BENCHES}) == len(BENCHES)
