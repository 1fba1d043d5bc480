"""Layering: tilecomm's modules import one another without cycles, and the
runtime never reaches the compiler's layers.

The graph is built from every import statement in ``tilecomm/**/*.py``,
imports inside functions included (one needed to break a cycle is still a
cycle).  Importing ``a.b.c`` first runs the ``a`` and ``a.b`` package
``__init__`` modules, so those count as edges too, except for packages that
enclose the importing module (already running when it is)."""
import ast
import os

import pytest

import tilecomm

PKG_DIR = os.path.dirname(os.path.abspath(tilecomm.__file__))
ROOT = "tilecomm"
LOW = ("tilecomm.runtime", "tilecomm.transport", "tilecomm.backends", "tilecomm.dfx")
HIGH = ("tilecomm.frontend", "tilecomm.ops", "tilecomm.lower", "tilecomm.compiler",
        "tilecomm.language", "tilecomm.verify", "tilecomm.analysis")


def modules(pkg_dir=PKG_DIR, root=ROOT) -> dict:
    """module name -> (path, is_package)"""
    out = {}
    for dirpath, _, files in os.walk(pkg_dir):
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), pkg_dir)[:-3].split(os.sep)
            is_pkg = rel[-1] == "__init__"
            if is_pkg:
                rel = rel[:-1]
            out[".".join([root] + rel)] = (os.path.join(dirpath, f), is_pkg)
    return out


def _ancestors(name):
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(mods: dict, root=ROOT) -> dict:
    graph = {}
    for name, (path, is_pkg) in mods.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        package = name if is_pkg else name.rsplit(".", 1)[0]
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets.add(base)
                for a in node.names:                  # `from pkg import submodule`
                    if f"{base}.{a.name}" in mods:
                        targets.add(f"{base}.{a.name}")
        running = set(_ancestors(name)) | ({name} if is_pkg else set())
        edges = set()
        for t in targets:
            if not (t == root or t.startswith(root + ".")):
                continue
            for m in _ancestors(t) + [t]:
                if m in mods and m not in running and m != name:
                    edges.add(m)
        graph[name] = edges
    return graph


def find_cycle(graph):
    """One import cycle as a list of modules, or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    color = {n: WHITE for n in graph}
    stack = []

    def visit(n):
        color[n] = GREY
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if color.get(m, BLACK) == GREY:
                return stack[stack.index(m):] + [m]
            if color.get(m) == WHITE:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        color[n] = BLACK
        return None

    for n in sorted(graph):
        if color[n] == WHITE:
            found = visit(n)
            if found:
                return found
    return None


def reachable(graph, start):
    seen, todo = set(), [start]
    while todo:
        n = todo.pop()
        for m in graph.get(n, ()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


MODS = modules()
GRAPH = import_graph(MODS)


def test_no_import_cycle_among_tilecomm_modules():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("mod", sorted(m for m in MODS if m.startswith(LOW)))
def test_runtime_and_transport_do_not_reach_the_compiler(mod):
    bad = sorted(m for m in reachable(GRAPH, mod) | {mod} if m.startswith(HIGH))
    assert not bad, f"{mod} imports (directly or through others) {bad}"


def test_decorator_objects_are_leaves():
    """What the front end reads of a program function imports nothing above the IR."""
    for leaf in ("tilecomm.ir", "tilecomm.ir.functions", "tilecomm.ir.kinds",
                 "tilecomm.ir.forms", "tilecomm.ir.annotations", "tilecomm.runtime.executable"):
        bad = sorted(m for m in reachable(GRAPH, leaf) if m.startswith(HIGH))
        assert not bad, f"{leaf} reaches {bad}"


# ------------------------------------------------------------------ the checker can fail
def _write(tmp_path, files):
    pkg = tmp_path / "pkg"
    for rel, text in files.items():
        p = pkg / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return modules(str(pkg), "pkg")


def test_checker_finds_a_cycle_through_a_function_level_import(tmp_path):
    mods = _write(tmp_path, {"__init__.py": "", "a.py": "from . import b\n",
                             "b.py": "def f():\n    from .a import x\n"})
    assert find_cycle(import_graph(mods, "pkg")) in (["pkg.a", "pkg.b", "pkg.a"],
                                                     ["pkg.b", "pkg.a", "pkg.b"])


def test_checker_counts_a_package_init_as_imported(tmp_path):
    """Importing pkg.lang.leaf runs pkg/lang/__init__.py, which imports pkg.low."""
    mods = _write(tmp_path, {"__init__.py": "", "lang/__init__.py": "from ..low import f\n",
                             "lang/leaf.py": "", "low.py": "from .lang.leaf import X\n"})
    cycle = find_cycle(import_graph(mods, "pkg"))
    assert cycle and set(cycle) == {"pkg.lang", "pkg.low"}


def test_checker_accepts_a_package_importing_its_children(tmp_path):
    mods = _write(tmp_path, {"__init__.py": "from .a import x\n", "a.py": "from . import b\n",
                             "b.py": "import os\n"})
    assert find_cycle(import_graph(mods, "pkg")) is None
