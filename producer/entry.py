"""The console entry point, ``skill-eval`` (and ``python -m producer``): the worker early, then the command line.

It looks at its arguments before importing anything beyond the standard library, so that an
embedded run's worker starts (or a warm spare is claimed) while the command line imports
(producer/launch/prestart.py says why and how). Only then does it import the command line,
which nothing else in the producer imports.
"""

from __future__ import annotations

import gc
import os
import sys

from engine.heap import imports_frozen
from producer.launch import warm
from producer.launch.prestart import WAITING, needs_litellm, opens_embedded_cluster
from schemas.constants import LITELLM_PRELOAD_ENV

PYDANTIC_PLUGINS_ENV = "PYDANTIC_DISABLE_PLUGINS"


def main() -> None:
    """``skill-eval``: have the worker early when this is an embedded run, then the command line."""
    environ = dict(os.environ)  # as the command got it: the next one is asked to match this
    embedded = opens_embedded_cluster(sys.argv[1:], environ)
    spare = embedded and warm.enabled(environ, interactive=_on_terminal())
    lean = embedded and not needs_litellm(sys.argv[1:])
    # No pydantic plugin loads in this command or the workers it starts (they inherit it): one
    # would see every value the product validates, keys and agents' output among them, and
    # looking for plugins reads every installed package's metadata (10-20 ms per process). A
    # user who wants one sets the variable to another value.
    os.environ.setdefault(PYDANTIC_PLUGINS_ENV, "__all__")
    if lean:
        os.environ.setdefault(LITELLM_PRELOAD_ENV, "0")  # this run's worker processes
    if embedded and not (spare and WAITING.claim(environ)):
        WAITING.spawn()
    with imports_frozen():  # 0.2 s off the imports, 0.4 s off the exit's teardown (engine/heap.py)
        from producer.commands.cli import main as cli_main
    try:
        cli_main()
    finally:
        if spare:
            warm.leave(environ, lean=lean)
        gc.freeze()  # what the command built since: the teardown skips it too


def _on_terminal() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # no stdin, or a closed one
        return False
