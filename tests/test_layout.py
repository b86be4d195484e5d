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
    "worker.executor.canary": "the transcript-capture canary runs the external agent CLI once on this host",
    "worker.executor.external": "the canary needs the external executor's command line",
    "worker.executor.harness_binary": "a harness run stops with BLOCKED_NO_HARNESS before dispatch without its binary",
    "worker.sandbox": "the embedded run's host check probes with the very bwrap command line the sandbox builds",
}


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


def test_the_producer_imports_the_worker_room_only_to_enqueue_and_for_the_listed_host_checks() -> None:
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


CYCLE_FREE = ("schemas", "reducer", "harnesses", "prompts", "engine", "worker", "testkit", "viewer")
"""The rooms with no import cycle among their modules (the producer's are still being taken apart)."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(rooms: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of ``rooms`` it imports (lazy imports inside functions included;
    ``from package import module`` is an import of that module)."""
    known = {module_name(path): path for room in rooms for path in modules(room)}
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        targets: set[str] = set()
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets.add(node.module)
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {t for t in targets if t in known and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_among_the_modules_of_the_cycle_free_rooms() -> None:
    assert cycles(import_graph(CYCLE_FREE)) == []


def test_the_cycle_check_sees_a_cycle_closed_by_a_lazy_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


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


PRODUCT = tuple(room for room in ROOMS if room != "testkit")
"""Product code: every room but the test kit (tests and benchmarks are no room)."""
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


def test_every_redis_script_names_its_keys_and_argv_at_its_top_builds_no_key_and_is_loaded_by_name() -> None:
    scripts = sorted(LUA.glob("*.lua"))
    names = {
        node.value
        for room in PRODUCT
        for path in modules(room)
        for node in ast.walk(parse(path))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
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
