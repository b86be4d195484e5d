"""The rooms of the code base import only what docs/design/layout.md allows (read from the AST of every module)."""

from __future__ import annotations

import ast
import gc
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("schemas", "reducer", "harnesses", "prompts", "engine", "producer", "worker", "testkit", "viewer")
IO_LIBRARIES = ("redis", "celery", "kombu", "boto3", "botocore", "litellm")

FORBIDDEN: dict[str, tuple[str, ...]] = {
    # Pure rooms: values in, values out; their tests need no service.
    "schemas": ("reducer", "harnesses", "engine", "producer", "worker", "testkit", "viewer", *IO_LIBRARIES),
    "reducer": ("harnesses", "engine", "producer", "worker", "testkit", "viewer", *IO_LIBRARIES),
    "harnesses": ("reducer", "engine", "producer", "worker", "testkit", "viewer", *IO_LIBRARIES),
    "prompts": ("schemas", "reducer", "harnesses", "engine", "producer", "worker", "testkit", "viewer", *IO_LIBRARIES),
    # Shared ground: used by both sides, so it may know neither; it reads the records the reducer
    # folds (reducer.from_store asks it through a protocol), so it never imports the reducer either.
    "engine": ("reducer", "producer", "worker", "testkit", "viewer"),
    # The worker room never reaches back into the client, nor into the test doubles.
    "worker": ("producer", "testkit", "viewer"),
    "testkit": ("engine", "producer", "worker", "viewer", *IO_LIBRARIES),
    # The viewer reads the store and the run state and shows the reducer's figures; it runs nothing.
    "viewer": ("producer", "worker", "testkit", "harnesses", "prompts"),
}

PRODUCER_MAY_IMPORT_FROM_WORKER = {
    "worker.app": "enqueue: the task names and per-task time limits a message needs",
}
"""The client imports the worker room only to enqueue; the host checks (sandbox, canaries) are tasks."""

PRODUCT = ("schemas", "engine", "harnesses", "producer", "worker", "reducer", "prompts", "viewer")
"""Product code: every package but the tests, the benchmarks and the test kit."""


MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
SHORT_ROOMS = ("producer",)
"""Rooms held to the module and function lengths above (a function runs from its ``def`` to its last line)."""


def parse(path: Path) -> ast.Module:
    """``ast.parse`` with the garbage collector held off: a finalizer that runs inside CPython 3.11's
    AST construction (a socket another test left to the collector) corrupts its recursion counter
    ("AST constructor recursion depth mismatch"), failing an unrelated parse."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    finally:
        if enabled:
            gc.enable()


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, lazy ones inside functions included."""
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def modules(room: str) -> list[Path]:
    return sorted((ROOT / room).rglob("*.py"))


def within(module: str, packages: tuple[str, ...]) -> str | None:
    return next((p for p in packages if module == p or module.startswith(p + ".")), None)


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_a_room_imports_nothing_its_layout_forbids(room: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in modules(room)
        for line, module in imports(path)
        if within(module, FORBIDDEN[room])
    ]
    assert found == []


def test_the_producer_imports_the_worker_room_only_to_enqueue() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in modules("producer")
        for line, module in imports(path)
        if within(module, ("worker",)) and module not in PRODUCER_MAY_IMPORT_FROM_WORKER
    ]
    assert found == []


@pytest.mark.parametrize("room", [*ROOMS, "bench"])
def test_no_product_room_imports_the_tests(room: str) -> None:
    allowed = ("tests.engine_support",) if room == "bench" else ()  # a benchmark drives the same cluster
    found = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in modules(room)
        for line, module in imports(path)
        if within(module, ("tests",)) and module not in allowed
    ]
    assert found == []


def test_the_checker_sees_lazy_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from worker.pipeline import execute_shard\n    import redis.client\n")
    assert list(imports(module)) == [(2, "worker.pipeline"), (3, "redis.client")]
    assert within("redis.client", IO_LIBRARIES) == "redis" and within("redisx", IO_LIBRARIES) is None


def test_redis_keys_are_built_in_engine_keys_only() -> None:
    """The key prefix (and any literal key) appears nowhere else, so one module says every key there is."""
    owners = {ROOT / "engine" / "keys.py", ROOT / "schemas" / "constants.py"}
    found = []
    for room in (*ROOMS, "tests", "bench"):
        for path in modules(room):
            if path in owners or path == Path(__file__):
                continue
            for node in ast.walk(parse(path)):
                literal = isinstance(node, ast.Constant) and isinstance(node.value, str)
                if (isinstance(node, ast.Name) and node.id == "KEY_PREFIX") or (
                    literal and str(node.value).startswith("skill-eval:")  # type: ignore[attr-defined]
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")  # type: ignore[attr-defined]
    assert found == []


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(rooms: tuple[str, ...], root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of ``rooms`` it imports (a ``from package import module`` names the module;
    imports inside functions count like any other)."""
    paths = {module_name(p, root): p for room in rooms for p in sorted((root / room).rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in paths}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    target = target if target in paths else node.module
                    if target in paths and target != name:
                        graph[name].add(target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(frozenset(group))
    return found


def test_product_code_has_no_import_cycle() -> None:
    cycles = import_cycles(import_graph(PRODUCT))
    assert sorted(sorted(c) for c in cycles) == []


def test_the_cycle_check_sees_a_circle_closed_by_an_import_inside_a_function(tmp_path: Path) -> None:
    room = tmp_path / "room"
    (room / "sub").mkdir(parents=True)
    (room / "__init__.py").write_text("")
    (room / "sub" / "__init__.py").write_text("")
    (room / "a.py").write_text("from room.sub import b\n")
    (room / "sub" / "b.py").write_text("import room.c\n")
    (room / "c.py").write_text("def f():\n    from room import a\n")
    (room / "d.py").write_text("from room import a\n")
    assert import_cycles(import_graph(("room",), tmp_path)) == [frozenset({"room.a", "room.sub.b", "room.c"})]


def long_parts(path: Path) -> list[str]:
    """What in ``path`` is over the lengths: the module itself, and each function or method."""
    found = []
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{path.relative_to(ROOT)}: {lines} lines")
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} is {length} lines")
    return found


@pytest.mark.parametrize("room", SHORT_ROOMS)
def test_no_module_or_function_of_the_room_is_over_its_length(room: str) -> None:
    assert [part for path in modules(room) for part in long_parts(path)] == []


LONG_MODULES_BEING_SPLIT: frozenset[str] = frozenset()
"""Product modules still over ``MAX_MODULE_LINES`` while their split is under way; none may be added."""


def test_no_module_of_the_product_is_over_its_length() -> None:
    """The module length holds for every room of the product, not only the producer's."""
    long = {
        str(path.relative_to(ROOT)): lines
        for room in PRODUCT
        for path in modules(room)
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert set(long) <= LONG_MODULES_BEING_SPLIT, long


PRODUCER_ROOMS = ("corpus", "results", "plan", "launch", "commands")
"""The producer's rooms in the order they may import one another (docs/design/layout.md)."""


def test_a_producer_room_imports_only_the_rooms_before_it() -> None:
    graph = import_graph(("producer",))
    rank = {f"producer.{room}": i for i, room in enumerate(PRODUCER_ROOMS)}

    def room(module: str) -> str | None:
        return next((r for r in rank if module == r or module.startswith(r + ".")), None)

    later = [
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if (mine := room(module)) and (theirs := room(target)) and rank[theirs] > rank[mine]
    ]
    assert later == []
    assert {m for m in graph if room(m) is None} == {"producer", "producer.__main__", "producer.entry"}


GENERIC_HARNESS_MODULES = (
    "worker/executor/harness.py",
    "worker/executor/harness_task.py",
    "worker/executor/harness_binary.py",
    "worker/executor/harness_stage.py",
    "worker/executor/registry.py",
    "worker/executor/shard_job.py",
    "worker/pipeline.py",
    "harnesses/adapter.py",
    "harnesses/activations.py",
)
"""The code that runs every harness alike: what is particular to one harness is its adapter's."""


def harness_words() -> list[str]:
    from harnesses.registry import HARNESSES

    words = set()
    for name, factory in HARNESSES.items():
        words |= {name, name.replace("-", " "), name.replace("-", ""), type(factory()).__name__.lower()}
    return sorted(words)


@pytest.mark.parametrize("relative", GENERIC_HARNESS_MODULES)
def test_the_generic_harness_code_names_no_harness(relative: str) -> None:
    """No string, comment, name or import of it names a registered harness (or its adapter class)."""
    path = ROOT / relative
    text = path.read_text(encoding="utf-8").lower()
    named = [w for w in harness_words() if w in text]
    adapters = [m for _, m in imports(path) if within(m, ("harnesses",)) and m.split(".")[-1] in _adapter_modules()]
    assert (named, adapters) == ([], [])


def _adapter_modules() -> set[str]:
    from harnesses.registry import HARNESSES

    return {type(factory()).__module__.split(".")[-1] for factory in HARNESSES.values()}


LUA = ROOT / "engine" / "lua"


def test_no_python_module_of_the_product_holds_a_redis_script() -> None:
    """Redis scripts live in engine/lua/*.lua, loaded by engine/scripts.py: one per file, its KEYS and ARGV
    written at its top, none hidden in a Python string."""
    found = [
        str(path.relative_to(ROOT))
        for room in PRODUCT
        for path in modules(room)
        if "redis.call(" in path.read_text(encoding="utf-8")
    ]
    assert found == []


def _header(script: Path) -> str:
    lines = script.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in itertools.takewhile(lambda line: line.startswith("--"), lines))


def _script_names(tree: ast.AST) -> set[str]:
    """The scripts a module names: each string constant (``register(client, "fleet_beat")``), and
    ``<prefix>_<name>`` for each constant subscript of a module that loads ``scripts(client, "<prefix>")``
    (``self._lua["claim"]``)."""
    constants = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    prefixes = {
        n.args[1].value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "scripts" and len(n.args) == 2
        if isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str)
    }
    picked = {
        n.slice.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)
    }
    return constants | {f"{prefix}_{name}" for prefix in prefixes for name in picked}


def test_every_redis_script_names_its_keys_and_argv_at_its_top_builds_no_key_and_is_loaded_by_name() -> None:
    scripts = sorted(LUA.glob("*.lua"))
    names = {name for room in PRODUCT for path in modules(room) for name in _script_names(parse(path))}
    undocumented = [s.name for s in scripts if "KEYS[1]" not in _header(s) or "ARGV" not in _header(s)]
    keyed = [s.name for s in scripts if "skill-eval:" in s.read_text(encoding="utf-8")]  # keys: engine/keys.py
    unused = [s.name for s in scripts if s.stem not in names]
    assert len(scripts) >= 20 and (undocumented, keyed, unused) == ([], [], [])


FOLD_MODULES = ("reducer/stream.py", "reducer/counters.py", "reducer/rows.py", "reducer/from_store.py")
"""The one reduce: the fold, its counters, the rows it keeps, and the one way a caller gets a run's result."""


def defined_functions(path: Path, top_level_only: bool) -> set[str]:
    tree = parse(path)
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    return {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_the_fold_is_the_only_reduce_and_reimplements_no_rule_of_scoring() -> None:
    """A function or method of the fold named like one of ``reducer/scoring.py`` would be the same
    figure written twice (as ``reduce_skill`` and ``_leaderboard`` once were); the fold calls the rules."""
    rules = defined_functions(ROOT / "reducer" / "scoring.py", top_level_only=True)
    found = {
        f"{module}: {name}"
        for module in FOLD_MODULES
        for name in defined_functions(ROOT / module, top_level_only=False) & rules
    }
    assert found == set()
    assert not rules & {"reduce_run", "reduce_skill"}  # no second reduce beside the fold


def test_the_checker_sees_methods_named_like_a_rule(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def rate():\n    pass\nclass F:\n    def _leaderboard(self):\n        pass\n")
    assert defined_functions(module, top_level_only=False) == {"rate", "_leaderboard"}
    assert defined_functions(module, top_level_only=True) == {"rate"}
