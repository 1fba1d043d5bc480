"""The test tiers of tests/conftest.py: the fast tier (``pytest --quick``)
keeps a test of every test module, a ``copy`` case of every multi-rank
module (but those whose every test names its fast cases), and every case
its lists name; the lists name real tests."""
import ast
import os
import re
import subprocess
import sys

import pytest

import conftest
from conftest import MPI_SMOKE, QUICK_CASES, TESTS_DIR

ROOT = os.path.dirname(TESTS_DIR)


def _test_modules() -> dict:
    """tests/<dir>/test_*.py -> the names of the test functions it defines."""
    out = {}
    for sub in ("unit", "ranks", "mpi"):
        folder = os.path.join(TESTS_DIR, sub)
        for name in sorted(os.listdir(folder)):
            if name.startswith("test_") and name.endswith(".py"):
                with open(os.path.join(folder, name)) as f:
                    tree = ast.parse(f.read())
                out[f"tests/{sub}/{name}"] = {n.name for n in tree.body
                                              if isinstance(n, ast.FunctionDef)
                                              and n.name.startswith("test")}
    return out


def _named_functions():
    for where in list(QUICK_CASES) + [n.split("[")[0] for n in MPI_SMOKE]:
        yield where.split("::")


def test_the_tier_lists_name_test_functions_that_exist():
    modules = {os.path.basename(path): fns for path, fns in _test_modules().items()}
    missing = [f"{file}::{fn}" for file, fn in _named_functions()
               if fn not in modules.get(file, set())]
    assert missing == []


def test_the_world_size_and_transport_rules_read_the_case_parameters():
    class Callspec:
        def __init__(self, params):
            self.params = params
            self.id = "-".join(str(v) for v in params.values())

    class Item:
        def __init__(self, file, name, params):
            self.path = os.path.join(TESTS_DIR, file)
            self.originalname = name
            self.callspec = Callspec(params)
            self.module = conftest           # its first test function: none

    def marks(file, name, fast_world=None, **params):
        return [getattr(m, "name", m) for m in
                conftest.tier_marks(Item(file, name, params), fast_world)]

    assert conftest.fast_world({1, 2, 3, 4}) == 2
    assert conftest.fast_world({1, 3}) == 1
    assert conftest.fast_world({3, 4}) is None
    assert marks("ranks/test_x.py", "test_a", 2, transport="shm", n=2) == []
    assert marks("ranks/test_x.py", "test_a", 2, transport="shm", n=1) == ["slow"]
    assert marks("ranks/test_x.py", "test_a", None, transport="shm", nr=4) == ["slow"]
    assert marks("ranks/test_x.py", "test_a", 2, transport="copy", n=2) == ["slow"]
    # the signal number of a case is no world size
    assert marks("ranks/test_x.py", "test_a", transport="shm", sig=15) == []
    assert marks("unit/test_x.py", "test_a", n=4) == []                   # one process
    assert marks("mpi/test_x.py", "test_a", n=2) == ["mpi", "slow"]


@pytest.mark.slow       # collects the whole suite in a new process (10-20 s)
def test_the_fast_tier_keeps_a_test_of_every_module():
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--quick",
                          "-p", "no:cacheprovider", "tests"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-5000:]
    quick = [line for line in run.stdout.splitlines() if "::" in line]
    files = {line.split("::")[0] for line in quick}
    assert sorted(set(_test_modules()) - files) == []
    # a copy case in every ranks module with a test function QUICK_CASES does
    # not list (the listed ones name their fast cases themselves)
    copy = {line.split("::")[0] for line in quick if re.search(r"\[copy\b", line)}
    ranks = {f for f, fns in _test_modules().items() if f.startswith("tests/ranks/")
             and any(f"{os.path.basename(f)}::{fn}" not in QUICK_CASES for fn in fns)}
    assert sorted(ranks - copy) == [], "ranks modules without a fast copy case"
    # every case the lists name is collected and fast
    named = {f"{file}::{fn}[{case}]" for where, cases in QUICK_CASES.items()
             for file, fn in [where.split("::")] for case in cases}
    named |= set(MPI_SMOKE)
    kept = {line.split("/", 2)[2] for line in quick}
    assert sorted(named - kept) == []
