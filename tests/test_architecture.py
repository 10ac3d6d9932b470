"""The layering of ARCHITECTURE.md, checked on the source: import directions, no cycles, SQL only in the store,
no page that scores, no module over 450 lines."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "hybridmem"

# Lowest first. A module may import its own component and any component of a lower layer, never a higher one or one
# beside it in the same layer: that keeps every arrow one way and rules out cycles between components.
LAYERS: list[set[str]] = [
    {"errors", "wording", "durable"},
    {"redaction"},
    {"config"},
    {"records", "tokenization", "background", "textfiles"},
    {"chunking", "sessions"},
    {"sources", "store", "embeddings"},
    {"ranking", "retrieve", "reader", "querylog"},
    {"sync"},
    {"searching"},
    {"index"},
    {"fallback", "tools", "watch"},
    {"eval", "serve"},
    {"commands"},
    {"eval.cli", "serve.cli", "cachecli", "bench", "workbench", "explain"},
    {"cli"},
]
LAYER = {c: i for i, layer in enumerate(LAYERS) for c in layer}

# Narrower than the layers allow.
ONLY = {
    "ranking": {"config", "errors", "records", "tokenization"},  # pure: no I/O below the facade
    "store": {"config", "errors", "tokenization"},
}
NEVER = {
    "workbench": {"ranking", "store", "retrieve", "sync"},  # pages reach ranking through the facade or hybridmem.eval
}

SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET|"
                 r"CREATE\s+(VIRTUAL\s+)?TABLE|DROP\s+TABLE|PRAGMA\s+\w+)", re.S)


def _component(module: str) -> str:
    parts = module.split(".")
    if parts[:3] in (["hybridmem", "eval", "cli"], ["hybridmem", "serve", "cli"]):
        return f"{parts[1]}.cli"
    return parts[1] if len(parts) > 1 else "__init__"


def _modules() -> dict[str, Path]:
    out = {}
    for f in sorted(ROOT.rglob("*.py")):
        parts = f.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imports(path: Path) -> set[str]:
    """Every ``hybridmem.*`` module imported anywhere in the file (inside functions too), and every one it names in a
    string outside a docstring: a module named by string (``importlib.import_module(name)``, a list of names to load)
    is a dependency all the same, and the one an ``import`` statement never shows."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {m for a in node.names if _is_module(m := f"{node.module}.{a.name}")}  # ``from pkg import mod``
    docstrings = _docstrings(tree)
    found |= {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docstrings and _is_module(node.value)}
    return {m for m in found if m.startswith("hybridmem.")}


def _is_module(name: str) -> bool:
    if not re.fullmatch(r"hybridmem(\.\w+)+", name):
        return False
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def component_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in _modules().items():
        if name == "hybridmem":
            continue
        src = _component(name)
        graph[src] |= {_component(m) for m in _imports(path)} - {src}
    return graph


def test_every_component_has_a_layer() -> None:
    missing = set(component_graph()) - set(LAYER)
    assert not missing, f"add these to LAYERS (and ARCHITECTURE.md): {sorted(missing)}"


def test_imports_point_down_only() -> None:
    wrong = []
    for src, targets in component_graph().items():
        for dst in targets:
            if LAYER.get(dst, -1) >= LAYER.get(src, 99):
                wrong.append(f"{src} -> {dst}")
            if src in ONLY and dst not in ONLY[src]:
                wrong.append(f"{src} -> {dst} (only {sorted(ONLY[src])})")
            if dst in NEVER.get(src, ()):
                wrong.append(f"{src} -> {dst} (forbidden)")
    assert not wrong, "imports against ARCHITECTURE.md: " + ", ".join(sorted(wrong))


def test_no_import_cycle_between_modules() -> None:
    mods = _modules()
    graph = {name: {m for m in _imports(path) if m in mods and m != name} for name, path in mods.items()}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1 and not _is_package_of(nxt, node):
                pytest.fail("import cycle: " + " -> ".join([*stack[stack.index(nxt):], nxt]))
            if nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in graph:
        if name not in state:
            visit(name, [name])


def _is_package_of(package: str, module: str) -> bool:
    """A package's ``__init__`` re-exporting its own submodules is not a cycle."""
    return module.startswith(package + ".")


def test_sql_lives_in_the_store() -> None:
    offenders = []
    for name, path in _modules().items():
        if name.startswith("hybridmem.store"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                    and SQL.search(node.value):
                offenders.append(f"{name}:{node.lineno}")
    assert not offenders, f"SQL outside hybridmem/store: {offenders}"


def test_no_module_over_450_lines() -> None:
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 450}
    assert not long, f"split these modules: {long}"


def test_the_checks_catch_a_wrong_direction(tmp_path: Path) -> None:
    """The parser sees imports inside functions, where a cycle usually hides."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from hybridmem.index import MemoryIndex\n    import hybridmem.store.schema\n")
    assert _imports(f) == {"hybridmem.index", "hybridmem.store.schema"}
    assert _component("hybridmem.eval.cli") == "eval.cli" and _component("hybridmem.retrieve.vectors") == "retrieve"


def test_the_checks_see_a_module_named_by_string(tmp_path: Path) -> None:
    """``cli`` once loaded its subcommand modules by name and each imported ``cli`` back: a cycle no import statement
    showed. A module named in a string counts as an import; other strings and docstrings do not."""
    f = tmp_path / "m.py"
    f.write_text('"""hybridmem.index"""\nimport importlib\nMODULES = ("hybridmem.eval.cli", "hybridmem.toml")\n'
                 'def load():\n    importlib.import_module("hybridmem.bench")\n    from hybridmem.serve import cli\n')
    assert _imports(f) == {"hybridmem.eval.cli", "hybridmem.bench", "hybridmem.serve", "hybridmem.serve.cli"}


PARTS = {"store", "syncer", "retriever"}  # MemoryIndex's parts: callers use its methods
OWNERS = ("hybridmem.index", "hybridmem.store", "hybridmem.sync", "hybridmem.retrieve")


def test_callers_use_the_facade_not_its_parts() -> None:
    """Outside the facade and the parts themselves, nothing reaches into ``idx.store``, ``idx.syncer`` or
    ``idx.retriever`` (``settings.store``, the store's settings, is not a part)."""
    files = {n: p for n, p in _modules().items() if not n.startswith(OWNERS)} | {"app": ROOT.parent / "app.py"}
    found = []
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in PARTS:
                owner = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
                if not owner.endswith("settings"):
                    found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not found, f"use a MemoryIndex method instead: {found}"
