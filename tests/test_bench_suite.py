"""`make bench`'s page: every benchmark's exit and output, a failed one marked, nothing invented."""

from __future__ import annotations

from bench.suite import BENCHES, TAIL_LINES, Bench, Outcome, render


def test_the_page_holds_each_benchmarks_own_output_and_marks_a_failure() -> None:
    ok = Outcome(
        Bench("alpha", "<= 1 s", ("bench_alpha.py", "--x", "1")), 0, 12.4, "noise\n" * 50 + "alpha median 0.8 s\n"
    )
    bad = Outcome(Bench("beta", "(measured)", ("bench_beta.py",)), 3, 2.0, "Traceback: boom\n")
    page = render([ok, bad], machine="m", commit="abc", started="s", load_before="0.1", load_after="0.2")
    assert "| alpha | <= 1 s | ok | 12 | `.venv/bin/python bench/bench_alpha.py --x 1` |" in page
    assert "| beta | (measured) | FAILED (3) | 2 |" in page
    assert "alpha median 0.8 s" in page and "Traceback: boom" in page
    alpha = page.split("## alpha")[1].split("## beta")[0]
    assert alpha.count("noise") == TAIL_LINES - 1  # only the end of a long output
    assert "do not edit by hand" in page and "commit: abc" in page


def test_every_benchmark_the_suite_names_exists() -> None:
    from pathlib import Path

    bench = Path(__file__).resolve().parent.parent / "bench"
    assert [b.name for b in BENCHES if not (bench / b.args[0]).is_file()] == []
    assert len({b.name for b in BENCHES}) == len(BENCHES)
