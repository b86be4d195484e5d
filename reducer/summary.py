"""The ``SKILL-EVAL COMPLETE`` block a run ends with: one screen after the corpus lines, the verdict last. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from reducer.agreement import agreement_lines
from reducer.plugin_score import plugin_complete_lines
from reducer.render import corpus_status
from reducer.render_adaptive import summary_lines
from reducer.render_compare import comparison_summary, noise_summary
from reducer.render_triggers import complete_lines, gates_text
from reducer.threshold import threshold_text
from schemas.outcome import CalibrationRecord, CalibrationStatus
from schemas.report import UNFINISHED, CaseRun, RunResult
from schemas.shard import CURRENT
from schemas.visible import visible
from schemas.words import plural


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


FAILURES_SHOWN = 20
"""Failing assertions the COMPLETE block lists (most frequent first); the rest are counted and left to the page."""

CALIBRATION_SKIPPED = CalibrationRecord(judge="-", status=CalibrationStatus.SKIPPED).describe()
"""A judge's calibration as the result states it under --no-calibration: not asked for, not listed."""

REASONS_SHOWN = 5
"""Reasons the COMPLETE block lists before the verdict; the rest are counted and left to the page."""


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def failing_assertions(result: RunResult) -> list[tuple[int, str]]:
    """Every failing assertion of the run once, with how many shards it failed in, most frequent first."""
    groups: dict[tuple[str, str, int, str], list[tuple[CaseRun, str]]] = {}
    for s in result.skills:
        for r in s.runs:
            for v in r.verdicts:
                if not v.passed:
                    groups.setdefault((s.skill, s.variant, r.case_id, v.text), []).append((r, v.evidence))
    lines = []
    for (skill, variant, case_id, text), seen in groups.items():
        first, evidence = seen[0]
        arm = "" if variant == CURRENT else f" [{variant}]"
        where = (
            f"{first.model} e{first.epoch}"
            if len(seen) == 1
            else f"{len(seen)} shards, e.g. {first.model} e{first.epoch}"
        )
        lines.append(
            (len(seen), f"FAIL {skill}{arm} case {case_id} ({where}): {_one_line(text)} -> {_one_line(evidence)}")
        )
    return sorted(lines, key=lambda item: -item[0])


def unverified_passes(result: RunResult) -> list[str]:
    """The line saying how many judged passes of the current arm quote no tool call or result
    (they count as passes unless --strict-evidence; the Markdown report marks each), or none."""
    checked = [
        v.evidence_verified
        for s in result.skills
        if s.variant == CURRENT
        for r in s.runs
        for v in r.verdicts
        if v.check == "judge" and v.passed and v.evidence_verified is not None
    ]
    unverified = checked.count(False)
    if not unverified:
        return []
    return [
        f"unverified passes: {unverified} of {len(checked)} judged passes quote no tool call or result "
        "(counted as passes; --strict-evidence fails them)"
    ]


def _reports(paths: Sequence[str]) -> list[str]:
    """The report files summarised: their folder and the run's page, not one line per corpus."""
    if not paths:
        return []
    folders = sorted({p.rsplit("/", 1)[0] if "/" in p else "." for p in paths})
    pages = [p for p in paths if p.endswith(".html")]
    transcripts = sum(p.endswith("-transcript.txt") for p in paths)
    kinds = "md and json per corpus, " + (f"{plural(transcripts, 'failing-case transcript')}, " if transcripts else "")
    out = [f"reports: {', '.join(folders)}/ ({len(paths)} files: {kinds}JUnit, HTML)"]
    return out + [f"page: {p}" for p in pages]


NOT_ENDED_WHY = "still running or lost"
"""Why shards did not end, when nothing recorded the run's end: the store cannot tell a shard
still running from one lost."""


def _header(result: RunResult, not_ended_why: str) -> str:
    """``SKILL-EVAL COMPLETE`` once every shard ended; else the block is a partial one, and says so
    first, and why the shards did not end."""
    unfinished = sum(s.unfinished for s in result.skills)
    if not unfinished:
        return "SKILL-EVAL COMPLETE"
    total = sum(s.shard_count for s in result.skills)
    return f"SKILL-EVAL PARTIAL ({unfinished} of {total} shards not ended: {not_ended_why})"


def render_complete_block(result: RunResult, paths: Sequence[str], not_ended_why: str = NOT_ENDED_WHY) -> str:
    """The contract's ``SKILL-EVAL COMPLETE`` block, with the verdict once, as its last line.

    However large the run, what follows the corpus lines is short: at most
    :data:`FAILURES_SHOWN` failing assertions and :data:`REASONS_SHOWN` reasons, each with a count
    of the rest, the report folder and page, and the verdict as the last line. ``not_ended_why``:
    what became of the shards not ended, when a record of the run's end says (``the run was
    interrupted``).
    """
    lines = [_header(result, not_ended_why), f"run: {result.run_id}"]
    if result.triggers is not None:  # no assertions: the trigger gates apply, not the threshold
        lines.append(f"gates: {gates_text(result.triggers)}")
    else:
        lines.append(threshold_text(result).replace("threshold ", "threshold: ", 1))
    for s in result.skills:
        # shards not ended are no infra failure (the run may still be going): counted apart
        infra = ", ".join(f"{k} {v}" for k, v in s.infra.items() if v and k != UNFINISHED) or "none"
        infra += f"; not ended: {s.unfinished}" if s.unfinished else ""
        if result.triggers is not None:  # the figures follow below
            arm = f"{s.variant}, triggers"  # with --compare, the arms are told apart by name
            lines += [f"skill: {s.skill} [{arm}]  queries: {s.cases}", f"  not run to an end (infra): {infra}"]
            continue
        status = corpus_status(s, result)
        mark = f"  {status}" if status else ""
        lines.append(f"skill: {s.skill} [{s.variant}]  cases: {s.cases}  result: {s.headline}{mark}")
        lines.append(f"  not graded (infra): {infra}; blocked: {s.blocked_count}")
        lines += plugin_complete_lines(s)
    page = next((p for p in paths if p.endswith(".html")), "the reports")
    fails = failing_assertions(result)
    if fails:
        shards = sum(n for n, _ in fails)
        lines.append(
            f"failing assertions: {len(fails)} distinct, {plural(shards, 'failed verdict')}; most frequent first:"
        )
        lines += [f"  {line}" for _, line in fails[:FAILURES_SHOWN]]
        if len(fails) > FAILURES_SHOWN:
            lines.append(f"  and {len(fails) - FAILURES_SHOWN} more: see {page}")
    lines += [f"compare {c.skill}: {comparison_summary(c)}" for c in result.comparisons if c.model is None]
    lines += [
        f"noise floor {c.skill}: {noise_summary(c.noise)}"
        for c in result.comparisons
        if c.model is None and c.noise is not None
    ]
    lines += summary_lines(result.adaptive) if result.adaptive is not None else []
    lines += complete_lines(result.triggers) if result.triggers is not None else []
    lines += [f"skipped: {s}" for s in result.skipped]
    if result.aggregate_headline:
        lines.append(result.aggregate_headline)
    if len(result.leaderboard) > 1 and result.triggers is None:  # a trigger run has no composite to rank
        lines.append(
            "leaderboard (composite): " + ", ".join(f"{m.model} {_pct(m.composite_mean)}" for m in result.leaderboard)
        )
    # Asked-for calibration is said whatever the verdict: a FAIL's reasons leave out the WARN that names it.
    lines += [
        _one_line(f"judge {judge} calibration: {status}")
        for judge, status in result.calibration.items()
        if status != CALIBRATION_SKIPPED
    ]
    overall = [a for a in result.human_agreement if a.scope == "all"]
    lines += [f"judge vs people: {line}" for line in agreement_lines(overall)]
    lines += unverified_passes(result)
    lines += [f"reason: {r}" for r in result.reasons[:REASONS_SHOWN]]
    if len(result.reasons) > REASONS_SHOWN:
        lines.append(f"and {len(result.reasons) - REASONS_SHOWN} more reasons: see {page}")
    lines += _reports(paths)
    lines.append(f"verdict: {result.verdict.value}")
    # Names come from the repo and the recordings (a model, a case, a file): none may start a line
    # of its own or send the terminal a control sequence.
    return "\n".join(visible(line) for line in lines) + "\n"


def render_nothing_run(result: RunResult) -> str:
    """What a run with nothing left to run prints instead of the COMPLETE block: no run was stored
    and no report written (the earlier reports stand), so there is no run id, no report folder and
    no page; the corpora left out, the reasons (each carried verdict) and the verdict, last."""
    lines = ["SKILL-EVAL NOTHING RUN (no run stored, no report written: the earlier reports stand)"]
    lines += [f"skipped: {s}" for s in result.skipped]
    lines += [f"reason: {r}" for r in result.reasons]
    lines.append(f"verdict: {result.verdict.value}")
    return "\n".join(visible(line) for line in lines)
