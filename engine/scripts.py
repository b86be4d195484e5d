"""The Redis Lua scripts, kept as files in ``engine/lua/`` and read once per process.

Every read-modify-write of shared state is one script, so it is atomic on the server. Each
file starts with a comment naming its KEYS and ARGV in order, the only place that order is
written down besides the call. A script that needs the product's names (the shard states)
takes them from ``${name}`` placeholders filled here at load, so the names have one source,
:class:`schemas.status.ShardState`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from importlib import resources
from string import Template

import redis
from redis.commands.core import Script

from engine.broker import DRAINED, WAITING_STATES
from schemas.status import TERMINAL_STATES, ShardState


def _lua_set(states: tuple[ShardState, ...] | frozenset[ShardState]) -> str:
    """A Lua table literal used as a set of state names, in a fixed order: a frozenset's order changes
    with each process's string hashing, and every process must load the same text (one SHA in Redis)."""
    return "{" + ",".join(f'["{s.value}"]=true' for s in sorted(states, key=lambda s: s.value)) + "}"


NAMES = {
    **{state.name.lower(): state.value for state in ShardState},
    "terminal": _lua_set(TERMINAL_STATES),
    "waiting": _lua_set(WAITING_STATES),
    "drained": f"{DRAINED:.0f}",
}
"""What a script's ``${name}`` placeholders stand for: each shard state's name by its enum member
(``${executing}``), the Lua sets of the terminal and the waiting states, and the watermark of an
empty queue (``${drained}``)."""


class ScriptNotFound(LookupError):
    """No script of that name in ``engine/lua/``."""


@functools.cache
def source(name: str) -> str:
    """The text of ``engine/lua/<name>.lua`` with its placeholders filled (read once per process)."""
    path = resources.files("engine").joinpath("lua", f"{name}.lua")
    if not path.is_file():
        raise ScriptNotFound(f"no Redis script {name!r} in engine/lua/")
    return Template(path.read_text(encoding="utf-8")).substitute(NAMES)


def register(client: redis.Redis, name: str) -> Script:
    """The script ``name`` bound to ``client`` (run by EVALSHA, loaded into Redis on first use)."""
    return client.register_script(source(name))


@functools.cache
def _names(prefix: str) -> tuple[str, ...]:
    """The scripts named ``<prefix>_*`` in ``engine/lua/``."""
    files = resources.files("engine").joinpath("lua").iterdir()
    return tuple(sorted(f.name.removesuffix(".lua") for f in files if f.name.startswith(f"{prefix}_")))


def scripts(client: redis.Redis, prefix: str) -> Mapping[str, Script]:
    """Every script of one prefix bound to ``client``, by the rest of its name:
    ``scripts(client, "state")["claim"]`` is ``engine/lua/state_claim.lua``. Each owner of shared
    state (:mod:`engine.state`, :mod:`engine.delivery`, ...) keeps its scripts under its own prefix,
    so a script added to the folder needs no line to be loaded."""
    return {name.removeprefix(f"{prefix}_"): register(client, name) for name in _names(prefix)}


def reply_text(value: object) -> str:
    """A Redis reply as text. Replies are bytes: the engine's clients keep ``decode_responses`` off,
    since the same client serves the Lua scripts."""
    return value.decode() if isinstance(value, bytes) else str(value)


def shard_states(flat: Sequence[object]) -> list[tuple[str, ShardState]]:
    """A script's flat ``shard, state, shard, state, ...`` reply as pairs."""
    return [(reply_text(flat[i]), ShardState(reply_text(flat[i + 1]))) for i in range(0, len(flat), 2)]
