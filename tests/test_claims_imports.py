"""The import graph of ``paper_figs.claims`` (read from the source with ``ast``, every
import statement at any depth): no cycle among its modules, none of them imports the facade
``paper_figs.claims.engine``, and no study imports the claims (the INDEX is reached through
``paper_figs.index``).  Nothing here is statistical."""

from __future__ import annotations

import ast
from pathlib import Path

import paper_figs

PKG = Path(paper_figs.__file__).parent
CLAIMS = PKG / "claims"
PREFIX = "paper_figs.claims"


def _claims_modules(node: ast.AST, known: set[str]) -> set[str]:
    """The ``paper_figs.claims`` modules one import statement names."""
    out = set()
    if isinstance(node, ast.Import):
        out = {a.name for a in node.names if a.name.startswith(PREFIX + ".")}
    elif isinstance(node, ast.ImportFrom) and node.module:
        if node.module == PREFIX:
            out = {f"{PREFIX}.{a.name}" for a in node.names}
        elif node.module.startswith(PREFIX + "."):
            out = {node.module}
    return {m for m in out if m in known}


def import_graph(folder: Path = CLAIMS) -> dict[str, set[str]]:
    """Module → the modules of the package it imports (top level or inside a function)."""
    known = {f"{PREFIX}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"}
    graph = {}
    for p in sorted(folder.glob("*.py")):
        if p.stem == "__init__":
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        graph[f"{PREFIX}.{p.stem}"] = set().union(
            *(_claims_modules(n, known) for n in ast.walk(tree))) - {f"{PREFIX}.{p.stem}"}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in order, the first repeated at the end), or
    None."""
    state, stack = {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in state and (c := visit(v)) is not None:
                return c
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state and (c := visit(u)) is not None:
            return c
    return None


def test_the_cycle_finder_sees_a_cycle():
    """Negative control: a cycle of three modules is found, a chain is not."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_claims_import_graph_has_no_cycle():
    graph = import_graph()
    assert f"{PREFIX}.registry" in graph and f"{PREFIX}.verdicts" in graph
    assert find_cycle(graph) is None, " → ".join(find_cycle(graph))
    # the layers: the vocabulary and the data access import no other part of the engine
    assert graph[f"{PREFIX}.data"] == set()
    assert graph[f"{PREFIX}.verdicts"] <= {f"{PREFIX}.data"}
    assert graph[f"{PREFIX}.rules"] <= {f"{PREFIX}.data", f"{PREFIX}.verdicts"}
    # only the facade imports itself away: no module of the package imports it
    assert not [m for m, deps in graph.items() if f"{PREFIX}.engine" in deps]


def test_no_study_imports_the_claims():
    """The claims are a leaf: of the package's other modules only ``paper_figs.index`` (the
    public entry of the INDEX) imports them."""
    importers = []
    for p in sorted(PKG.glob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for n in ast.walk(tree):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [n.module or ""] if isinstance(n, ast.ImportFrom) else []
            if any(x == PREFIX or x.startswith(PREFIX + ".") for x in names):
                importers.append(p.stem)
    assert sorted(set(importers)) == ["index"], importers
