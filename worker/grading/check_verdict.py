"""What every deterministic check gives back: its verdict, with the evidence quoted and cut. Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schemas.checks_base import Check
from schemas.trajectory import Trajectory
from schemas.verdict import AssertionVerdict

EVIDENCE_CHARS = 300
"""A quoted call or request is cut to this length in the verdict."""
Checker = Callable[[Any, Trajectory], AssertionVerdict]
"""The verdict of one kind of check on a trajectory (each takes its own check class)."""


def cut(text: str) -> str:
    """``text`` as a verdict quotes it: at most ``EVIDENCE_CHARS``, an ellipsis where it was cut."""
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 3] + "..."


def check_verdict(check: Check, passed: bool, evidence: str) -> AssertionVerdict:
    """The verdict of a deterministic ``check``: its text and weight, ``passed``, ``evidence``."""
    return AssertionVerdict(
        text=check.text, passed=passed, evidence=evidence, check="deterministic", weight=check.weight
    )


def presence_verdict(check: Check, wanted: bool, sought: str, found: str | None) -> AssertionVerdict:
    """The verdict of a ``check`` that wants something ``sought`` present (``wanted``) or absent,
    given a quote of the first one ``found`` (None: there is none).

    ``sought`` is a noun phrase that reads after "a" and after "no" (``"match for /x/ in the final
    reply"``). The evidence is the quote when it is present as wanted, ``no <sought>`` when it is
    absent as wanted, and on a fail ``absent: `` and what is missing: ``a <sought>``, or, when
    none was wanted, that one was found: ``no <sought> was wanted; one was found: <quote>``.
    """
    if found is None:
        return check_verdict(check, not wanted, f"absent: a {sought}" if wanted else f"no {sought}")
    if wanted:
        return check_verdict(check, True, found)
    return check_verdict(check, False, f"absent: no {sought} was wanted; one was found: {found}")
