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
    {"errors"},
    {"redaction"},
    {"config"},
    {"records", "tokenization", "background"},
    {"chunking", "sessions"},
    {"sources", "store", "embeddings"},
    {"ranking", "retrieve", "reader", "querylog"},
    {"sync"},
    {"index"},
    {"fallback", "tools", "watch"},
    {"eval", "serve"},
    {"cli"},
    {"eval.cli", "serve.cli", "cachecli", "bench", "workbench"},
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
    """Every ``hybridmem.*`` module imported anywhere in the file (inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if node.module == "hybridmem":
                found |= {f"hybridmem.{a.name}" for a in node.names}
    return {m for m in found if m.startswith("hybridmem.")}


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
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
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
