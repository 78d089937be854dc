"""The shape of the code: no import cycle, no new private coupling across modules, no
function over the size limits.

- **Import graph.**  The graph of ``specbound`` and of ``paper_figs`` is built from the
  source (``ast``): every ``import`` and ``from ... import`` statement, at module level *and*
  inside function bodies (a function-level import hides a cycle from the interpreter, not
  from the design), with relative imports (``from . import x``, ``from .m import y``)
  resolved against the importing module and ``from pkg import sub`` counted as an edge to
  the submodule ``pkg.sub``.  An import of a module's own parent package is not an edge (a
  submodule always runs its package's ``__init__`` first).  The graph must be acyclic,
  apart from the edges of :data:`CYCLE_EXCEPTIONS`, a list that only shrinks.
- **Private coupling** (below, :data:`PRIVATE_ALLOWED`).
- **Function size**: no function of ``specbound`` or ``paper_figs`` over 150 lines or with
  more than 10 positional parameters, apart from :data:`SIZE_EXCEPTIONS` (a list that only
  shrinks).

Cost: parsing about 150 source files, well under a second; nothing is imported.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Import edges allowed to close a cycle, each with its reason.  Remove an entry when its
#: edge goes; the test fails on an entry whose edge no longer exists, so the list only
#: shrinks.
CYCLE_EXCEPTIONS: dict[tuple[str, str], str] = {}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The syntax tree of one source file (parsed once per session)."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules(package: str) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The dotted names one import statement may load (the longest known module of each
    is taken later)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        origin = ".".join(base + ([node.module] if node.module else []))
    else:
        origin = node.module or ""
    return [origin] + [f"{origin}.{a.name}" for a in node.names]


def import_graph(package: str) -> dict[str, dict[str, int]]:
    """``{module: {imported module of the same package: first line}}``."""
    mods = _modules(package)
    graph: dict[str, dict[str, int]] = {m: {} for m in mods}
    for module, path in mods.items():
        tree = _tree(path)
        _add_edges(graph, module, tree, path.name == "__init__.py")
    return graph


def _add_edges(graph: dict[str, dict[str, int]], module: str, tree: ast.AST,
               is_package: bool) -> None:
    for node in ast.walk(tree):
        for name in _imported(node, module, is_package):
            parts = name.split(".")
            while parts and ".".join(parts) not in graph:
                parts.pop()
            target = ".".join(parts)
            if target and target != module and not module.startswith(target + "."):
                graph[module].setdefault(target, node.lineno)


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan 1972), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return sorted(found)


def _describe(graph, comp) -> str:
    edges = [f"  {a} -> {b} (line {graph[a][b]})" for a in comp for b in graph[a] if b in comp]
    return f"cycle of {len(comp)} modules:\n" + "\n".join(edges)


@pytest.mark.parametrize("package", ["specbound", "paper_figs"])
def test_import_graph_has_no_cycle(package):
    graph = import_graph(package)
    for a, b in CYCLE_EXCEPTIONS:
        if a in graph:
            graph[a].pop(b, None)
    found = cycles(graph)
    assert not found, f"{package}: " + "\n".join(_describe(graph, c) for c in found)


def test_cycle_exceptions_still_exist():
    """An exception whose edge is gone is removed from the list (the list only shrinks)."""
    graph = import_graph("paper_figs")
    gone = [f"{a} -> {b}" for a, b in CYCLE_EXCEPTIONS if b not in graph.get(a, {})]
    assert not gone, f"remove these from CYCLE_EXCEPTIONS: {gone}"


#: the top of ``paper_figs``: the modules that import the verdict machinery
#: (``paper_figs.index`` and the ``claims`` package); the studies' code and their shared
#: helpers never import them, only a study's ``if __name__ == "__main__":`` block calls
#: the study command line ``paper_figs._cli``
TOP = ("paper_figs._cli", "paper_figs.run_all", "paper_figs.index", "paper_figs.claims")


def _is_top(module: str) -> bool:
    return any(module == t or module.startswith(t + ".") for t in TOP)


def _main_block_lines(tree: ast.Module) -> set[int]:
    """The lines of the module's ``if __name__ == "__main__":`` blocks."""
    lines: set[int] = set()
    for node in tree.body:
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and getattr(node.test.left, "id", None) == "__name__"):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def test_only_the_top_imports_the_verdict_machinery():
    """No study module and no shared helper of ``paper_figs`` imports ``run_all``,
    ``index``, ``claims`` or ``_cli`` (the claims may build on the studies' helpers without a
    circle); a study's ``__main__`` block may call the study command line ``_cli``."""
    graph = import_graph("paper_figs")
    mods = _modules("paper_figs")
    found = []
    for module, edges in graph.items():
        if _is_top(module):
            continue
        main_lines = _main_block_lines(_tree(mods[module]))
        for target, line in edges.items():
            if _is_top(target) and not (target == "paper_figs._cli" and line in main_lines):
                found.append(f"{module} -> {target} (line {line})")
    assert not found, "imports of the top of paper_figs from below it:\n" + "\n".join(found)


def test_the_timings_file_is_the_one_the_claims_read():
    """``_common`` records timings under the name the claims engine reads (each module
    spells it, so that ``_common`` need not import the claims)."""
    from paper_figs import _common
    from paper_figs.claims import verdicts

    assert _common.TIMINGS == verdicts.TIMINGS


def test_the_graph_sees_function_level_and_relative_imports():
    """The scanner on a small tree: a cycle through a function-level ``from . import``."""
    graph = {"p": {}, "p.a": {}, "p.b": {}}
    for module, src in (("p.a", "def f():\n    from . import b\n"),
                        ("p.b", "from .a import f\n")):
        _add_edges(graph, module, ast.parse(src), False)
    assert graph["p.a"] == {"p.b": 2}
    assert graph["p.b"] == {"p.a": 1}
    assert cycles(graph) == [["p.a", "p.b"]]


# -- private coupling --------------------------------------------------------------------

#: the packages whose imports are checked for private coupling
SCANNED = ("specbound", "paper_figs", "benchmarks", "scripts")

#: Cross-module private imports that remain, each with its reason: ``(importer, imported)``,
#: where ``imported`` is ``module:_name`` for a private name and ``module`` for a private
#: module imported from outside its package.  A new one fails the test: give what is
#: shared a public name in the module that owns it (or move it there) instead.
PRIVATE_ALLOWED: dict[tuple[str, str], str] = {
    ("benchmarks._limits", "specbound.sim._config"):
        "benchmarks measure the compiled kernels and read their switches (threads, compile cache)",
    ("benchmarks._limits", "specbound.sim._kernels"):
        "benchmarks time the Numba kernels themselves",
    ("benchmarks.bench_against", "specbound.sim._kernels"):
        "benchmarks time the Numba kernels themselves",
    ("benchmarks.bench_mpfr_public", "specbound.sim._kernels"):
        "benchmarks time the Numba kernels themselves (the race against the public process)",
    ("benchmarks.bench_against", "specbound.sim.montecarlo:_chunks"):
        "the benchmark reproduces the Monte Carlo's chunking to time it alone",
    ("benchmarks.bench_llm", "paper_figs._real_runs"):
        "the n-gram benchmark's summaries prompt type is the real studies' summarisation set "
        "(one selection rule, summarize_prompts, not a second copy)",
    ("benchmarks.bench_decode", "specbound.sim._compiled"):
        "the benchmark compares the compiled loop with the Python loop directly",
    ("benchmarks.bench_decode", "specbound.sim._config"):
        "benchmarks read the kernels' switches (threads, compile cache)",
    ("paper_figs._common", "specbound.sim._config"):
        "the study CLI announces a first compilation (`compile_note`); a public home for "
        "it comes with the compiled-loop split",
    ("paper_figs._common", "specbound._io"):
        "atomic file writes of timings.csv (see `paper_figs._wm_common`)",
    ("paper_figs._wm_common", "specbound._io"):
        "atomic file writes (`specbound._io`): the package's private I/O helper, shared "
        "by the study scripts until it gets a public module",
    ("paper_figs.claims.data", "specbound._io"):
        "atomic file writes (see `paper_figs._wm_common`); the claims package is being split",
    ("paper_figs.claims.render", "specbound._io"):
        "atomic file writes of INDEX.md (see `paper_figs._wm_common`)",
    ("paper_figs.claims.engine", "paper_figs.claims.evaluation:_as_proved"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._as_proved` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.evaluation:_run"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._run` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.render:_cell"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._cell` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.render:_not_covered"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._not_covered` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.render:_params_of"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._params_of` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.render:_real_sample"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._real_sample` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.render:_section"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._section` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.render:_studies"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._studies` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.render:_verdict_cell"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._verdict_cell` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.rules:_se_text"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._se_text` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.rules:_too_small"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._too_small` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.rules:_w"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._w` (the tests move to the parts, then these go)",
    ("paper_figs.claims.engine", "paper_figs.claims.rules:_z"):
        "the engine facade re-exports its parts' helpers for the tests that reach them "
        "as `engine._z` (the tests move to the parts, then these go)",
    ("paper_figs.real_wm_rouge", "specbound._validation"):
        "argument checks (`specbound._validation`) shared with the package's entry points",
    ("scripts.run_notebook", "paper_figs._common"):
        "the notebook runner uses the studies' shared helpers (output folders, matplotlib setup)",
    ("scripts.study_outputs", "paper_figs._wm_common"):
        "the outputs listing reads the watermark studies' file map",
    ("specbound.cli", "specbound.sim._config"):
        "the CLI announces a first compilation of the kernels",
    ("specbound.cli", "specbound.testing._checks"):
        "`check-sampler` runs the conformance kit's checks (the kit's public face is "
        "`specbound.testing`)",
    ("specbound.sim._blake2b", "specbound.sim.prf:_PERSON"):
        "the compiled BLAKE2b copies the PRF's personalisation constant, which `prf.py` owns",
    ("specbound.sim._kernels", "specbound.sim.prf:_GOLDEN"):
        "the Numba kernels compile the PRF's constants and mixer, which `prf.py` owns",
    ("specbound.sim._kernels", "specbound.sim.prf:_mix"):
        "the Numba kernels compile the PRF's mixer, which `prf.py` owns",
    ("specbound.sim._model_kernels", "specbound.sim.prf:_GOLDEN"):
        "the Numba kernels compile the PRF's constants, which `prf.py` owns",
    ("specbound.sim._model_kernels", "specbound.sim.prf:_ONE"):
        "the Numba kernels compile the PRF's constants, which `prf.py` owns",
    ("specbound.sim._model_kernels", "specbound.sim.prf:_mix"):
        "the Numba kernels compile the PRF's mixer, which `prf.py` owns",
    ("specbound.sim._reference", "specbound.sim.prf:_GOLDEN"):
        "the reference loop mirrors the PRF's constants, which `prf.py` owns",
    ("specbound.sim._reference", "specbound.sim.prf:_ONE"):
        "the reference loop mirrors the PRF's constants, which `prf.py` owns",
    ("specbound.sim._reference", "specbound.sim.prf:_mix_np"):
        "the reference loop uses the PRF's vectorised mixer, which `prf.py` owns",
    ("specbound.testing._checks", "specbound.testing._harness:_Context"):
        "two private halves of the conformance kit (harness and checks) of one package",
    ("specbound.testing._checks", "specbound.testing._harness:_int_tokens"):
        "two private halves of the conformance kit of one package",
    ("specbound.testing._checks", "specbound.testing._harness:_readonly"):
        "two private halves of the conformance kit of one package",
    ("specbound.testing._checks", "specbound.testing._harness:_to_numpy"):
        "two private halves of the conformance kit of one package",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_container(module: str) -> str | None:
    """The package inside which the private module ``module`` may be imported (the parent of
    its first private component), or None for a public module."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            return ".".join(parts[:i])
    return None


@functools.cache
def private_imports() -> frozenset[tuple[str, str]]:
    """Every ``(importer, imported)`` pair of a cross-module private import in
    :data:`SCANNED` (see :data:`PRIVATE_ALLOWED`)."""
    mods: dict[str, Path] = {}
    for package in SCANNED:
        mods.update(_modules(package))
    found: set[tuple[str, str]] = set()

    def module_use(importer: str, target: str) -> None:
        container = _private_container(target)
        if container is not None and not (importer == container
                                          or importer.startswith(container + ".")):
            found.add((importer, target))

    for importer, path in mods.items():
        tree = _tree(path)
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in SCANNED:
                        module_use(importer, alias.name)
            elif isinstance(node, ast.ImportFrom):
                origin = _imported(node, importer, is_package)[0]
                if origin.split(".")[0] not in SCANNED:
                    continue
                module_use(importer, origin)
                for alias in node.names:
                    sub = f"{origin}.{alias.name}"
                    if sub in mods:
                        module_use(importer, sub)
                    elif _private(alias.name) and origin != importer:
                        found.add((importer, f"{origin}:{alias.name}"))
    return frozenset(found)


def test_no_new_cross_module_private_import():
    new = sorted(private_imports() - set(PRIVATE_ALLOWED))
    assert not new, ("cross-module private imports (give the name a public name in the module "
                     "that owns it, or add it to PRIVATE_ALLOWED with a reason):\n"
                     + "\n".join(f"  {a} imports {b}" for a, b in new))


def test_private_allowlist_only_shrinks():
    gone = sorted(set(PRIVATE_ALLOWED) - private_imports())
    assert not gone, f"remove these from PRIVATE_ALLOWED: {gone}"


# -- the recipes of docs/architecture.md ---------------------------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _registered(what: str) -> list[str]:
    """The names a registry holds: decoders, lossy rules, claim ids, studies."""
    if what == "decoder":
        from specbound.sim.decoders import DECODERS
        return list(DECODERS)
    if what == "rule":
        from specbound.theory import RULES
        return list(RULES)
    if what == "claim":
        from paper_figs.claims.registry import CLAIMS
        return [c.id for c in CLAIMS]
    studies = []  # modules of paper_figs marked FIGURE = True (what run_all runs)
    for path in sorted((ROOT / "paper_figs").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.Assign)
                    and any(getattr(t, "id", None) == "FIGURE" for t in node.targets)
                    and isinstance(node.value, ast.Constant) and node.value.value is True):
                studies.append(path.stem)
    return studies


@functools.cache
def _literals() -> dict[str, frozenset[str]]:
    """The string literals of every source file (package, studies, tests, benchmarks,
    scripts), by path relative to the repository."""
    out = {}
    for top in (*SCANNED, "tests"):
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = _tree(path)
            out[path.relative_to(ROOT).as_posix()] = frozenset(
                n.value for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return out


def _spelling_every(names: list[str]) -> set[str]:
    """The source files in which every one of ``names`` is written as a string literal."""
    return {path for path, literals in _literals().items() if set(names) <= literals}


def _bullets_after(section: str, marker: str) -> set[str]:
    """The backticked paths of the bullet list after the line containing ``marker``."""
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line)
    paths: set[str] = set()
    for line in lines[start + 1:]:
        if not line.strip():
            if paths:
                break
            continue
        if line.startswith("  "):  # the continuation of a bullet
            continue
        if not line.startswith("- "):
            break
        if line.strip() == "- none":
            continue
        paths.add(line.split("`")[1])
    return paths


def _recipe(what: str) -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    head = "### Adding a " + {"rule": "lossy rule"}.get(what, what)
    assert head in text, f"docs/architecture.md has no section {head!r}"
    section = text.split(head, 1)[1]
    return section.split("\n### ", 1)[0].split("\n## ", 1)[0]


@pytest.mark.parametrize("what", ["decoder", "rule", "claim", "study"])
def test_recipe_lists_the_files_that_spell_every_registered_name(what):
    """A recipe's file list is exactly the files a new entry must be written into."""
    label = {"decoder": "decoder name", "rule": "rule name", "claim": "claim id",
             "study": "study name"}[what]
    listed = _bullets_after(_recipe(what), f"Files that spell every registered {label}")
    actual = _spelling_every(_registered(what))
    assert listed == actual, (f"docs/architecture.md, adding a {what}: listed but not spelling "
                              f"every name {sorted(listed - actual)}; spelling every name but "
                              f"not listed {sorted(actual - listed)}")


def test_claim_recipe_names_the_tables_the_registry_gathers():
    tree = ast.parse((ROOT / "paper_figs" / "claims" / "registry.py").read_text("utf-8"))
    tables = {f"paper_figs/claims/{a.name}.py" for n in tree.body
              if isinstance(n, ast.ImportFrom) and n.module == "paper_figs.claims"
              for a in n.names}
    assert _bullets_after(_recipe("claim"), "registry.py` gathers") == tables


# -- function size -----------------------------------------------------------------------

#: the longest function and the most positional parameters allowed (``self`` / ``cls`` of
#: a method not counted)
MAX_LINES = 150
MAX_POSITIONAL = 10

#: Functions of ``specbound`` and ``paper_figs`` over :data:`MAX_LINES` lines or with more
#: than :data:`MAX_POSITIONAL` positional parameters, each with its reason:
#: ``"path:qualified.name"``.  A new one fails the test; an entry that no longer exceeds
#: fails too (the list only shrinks).
SIZE_EXCEPTIONS: dict[str, str] = {
    "specbound/llm/hf_generate.py:custom_generate":
        "transformers' custom_generate contract: one entry taking generate()'s whole "
        "configuration, checked and mapped to the decoder's arguments in one place",
    "specbound/sim/_blake2b.py:label_with_suffix":
        "a Numba kernel: the context label's words travel as scalars (no tuple allocation "
        "in the hot loop)",
    "specbound/sim/_compiled_lossy.py:correction":
        "a Numba kernel: a rule's parameters travel as arrays and scalars (no records)",
    "specbound/sim/_model_kernels.py:synthetic_logits":
        "a Numba kernel of the synthetic model: its parameters as scalars and arrays",
    "paper_figs/claims/liu.py:_claim":
        "a claims-table row constructor: one positional per column keeps the table readable",
    "paper_figs/claims/zhou.py:_claim":
        "a claims-table row constructor: one positional per column keeps the table readable",
}


def _functions(node: ast.AST, prefix: str = ""):
    """``(qualified name, def node)`` of every function in ``node``, nested ones included."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, child
            yield from _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def _size(fn: ast.FunctionDef) -> tuple[int, int]:
    """Lines (decorators excluded, docstring included) and positional parameters."""
    args = fn.args.posonlyargs + fn.args.args
    positional = len(args) - (1 if args and args[0].arg in ("self", "cls") else 0)
    return fn.end_lineno - fn.lineno + 1, positional


@functools.cache
def oversized() -> dict[str, tuple[int, int]]:
    """``{"path:name": (lines, positional)}`` of every function over the limits."""
    found = {}
    for top in ("specbound", "paper_figs"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for name, fn in _functions(_tree(path)):
                lines, positional = _size(fn)
                if lines > MAX_LINES or positional > MAX_POSITIONAL:
                    found[f"{path.relative_to(ROOT).as_posix()}:{name}"] = (lines, positional)
    return found


def test_no_function_over_the_size_limits():
    new = {k: v for k, v in oversized().items() if k not in SIZE_EXCEPTIONS}
    assert not new, (f"functions over {MAX_LINES} lines or {MAX_POSITIONAL} positional "
                     f"parameters (split them, or pass a record; SIZE_EXCEPTIONS lists the "
                     f"documented exceptions):\n"
                     + "\n".join(f"  {k}: {lines} lines, {pos} positional"
                                 for k, (lines, pos) in sorted(new.items())))


def test_size_exceptions_only_shrink():
    gone = sorted(set(SIZE_EXCEPTIONS) - set(oversized()))
    assert not gone, f"remove these from SIZE_EXCEPTIONS (now within the limits): {gone}"


def test_the_size_scan_counts_lines_and_positionals():
    src = ("class C:\n    def m(self, a, b, *, c):\n        return 1\n"
           "def f(a, /, b, *args, d=1):\n    def g():\n        pass\n    return g\n")
    got = {name: _size(fn) for name, fn in _functions(ast.parse(src))}
    assert got == {"C.m": (2, 2), "f": (4, 2), "f.g": (2, 0)}


def test_a_rule_without_a_chosen_colour_gets_a_derived_one(monkeypatch):
    """The lossy-rule recipe's colour entry is optional: a registered rule missing from
    ``RULE_COLORS`` is drawn in a derived colour (not None), distinct between such rules."""
    from paper_figs import _common
    from specbound.theory import RULES

    chosen = {k: v for k, v in _common.RULE_COLORS.items() if k not in RULES[-2:]}
    monkeypatch.setattr(_common, "RULE_COLORS", chosen)
    derived = [_common.rule_color(r) for r in RULES[-2:]]
    assert derived == list(_common.DERIVED_COLORS[:2])
    assert _common.rule_color(RULES[0]) == chosen[RULES[0]]
    assert _common.rule_color("no such rule") is None
