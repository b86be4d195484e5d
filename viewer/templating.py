"""The viewer's Jinja2 environment: its templates, autoescaped, and the filters they use.

Every page is rendered here with autoescaping and strict undefined names, so a string from the
repo, the corpus, the agent or a model is text on the page, never markup, and a template that
names a field the data lacks fails loudly instead of printing nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2
import markupsafe
from starlette.templating import Jinja2Templates

from reducer.html_parts import interval, pts
from reducer.scoring import tally
from schemas.report import Rate
from schemas.status import TERMINAL_STATES
from schemas.words import plural

TEMPLATES = Path(__file__).resolve().parent / "templates"


def templates() -> Jinja2Templates:
    """The pages' templates with their filters: ``pct`` (a share as a percent), ``plural``
    (``{{ n | plural("shard") }}``: "1 shard", "3 shards") and ``tally`` (what a rate is the ratio
    of: the case-weighted counts when a run's cases got unequal epochs), ``paired`` (a paired
    comparison's difference in points with its interval, as the reports print it), ``name`` (a
    model name that breaks only after its separators: :func:`name_breaks`)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined
    )
    env.filters.update(pct=lambda x: "-" if x is None else f"{x * 100:.1f}%", plural=plural)
    env.filters["tally"] = lambda rate: tally(Rate.model_validate(rate))
    env.filters["paired"] = paired
    env.filters["name"] = name_breaks
    env.globals["ended_states"] = [s.value for s in TERMINAL_STATES]
    return Jinja2Templates(env=env)


def paired(c: dict[str, Any]) -> str:
    """``-50.0 pts (-66.7 pts – -33.3 pts)``; from too few cases the interval is not shown, as in
    the reports (:func:`reducer.html_parts.interval`)."""
    return f"{pts(c['difference'])} ({interval(c['low'], c['high'], c['cases'], ' – ')})"


SEPARATOR = re.compile(r"([/_.-])")


def name_breaks(name: object) -> markupsafe.Markup:
    """``name`` escaped, with a ``<wbr>`` after each ``/``, ``-``, ``_`` and ``.``: a browser breaks
    ``openai/scripted-demo-executor`` at those and nowhere else (the ``name`` class breaks inside a
    part only when that part alone is wider than its box). No escape sequence holds a separator."""
    return markupsafe.Markup(SEPARATOR.sub(r"\1<wbr>", str(markupsafe.escape(name))))
