"""The op registry is complete, and error codes are declared exactly once.

Every primitive is declared by one record that drives checking, lowering and
docs; these tests fail as soon as a record lacks any of those, is not reachable
from the ``pl`` / ``pld`` surface, or is not exercised by both a positive and
a negative test.  Error codes raised anywhere in tilecomm must be listed in
``errors.CODES`` and every listed code must be raised somewhere.
"""
import ast
import linecache
import os
import re
from types import SimpleNamespace

import pytest

import tilecomm
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import CODES, FIXES, UserError
from tilecomm.ir.effects import Effect
from tilecomm.ops import registry
from tilecomm.ir.kinds import HOST, INCORE, ORCH
from tilecomm.runtime.controller import orchestrator as host_rt
from tilecomm.runtime.rank import context as rank_rt

import test_compile_errors as compile_errors

PKG = os.path.dirname(os.path.abspath(tilecomm.__file__))
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = registry.records()
# files whose programs are wrong on purpose; uses there count as negative tests only
NEGATIVE_FILE = re.compile(r"(bad|fail|error)", re.I)


def _id(rec):
    return rec.name


# ------------------------------------------------------------------ record contents
@pytest.mark.parametrize("rec", RECORDS, ids=_id)
def test_record_is_complete(rec):
    assert rec.rule is not None and callable(rec.rule), f"{rec.name} has no type rule"
    # a form of another op (an ergonomic collective) runs as that op: no implementation
    want = set() if rec.expands is not None else set(rec.contexts)
    assert set(rec.impls) == want, f"{rec.name}: implementations {rec.impls}"
    assert all(isinstance(e, Effect) for e in rec.effects), rec.effects
    assert rec.doc.strip(), f"{rec.name} has no doc"
    assert rec.contexts and rec.contexts <= {HOST, ORCH, INCORE}, rec.contexts
    assert rec.stub.record is rec and registry.lookup(rec.stub) is rec
    assert re.fullmatch(r"pld?(\.[a-z_]+)+", rec.name), rec.name


@pytest.mark.parametrize("rec", RECORDS, ids=_id)
def test_impl_is_what_the_lowering_calls(rec):
    """The lowering calls ``_rt.<impl.__name__>``: kernels run on a RankContext,
    HOST code on the HostRuntime; that method must be the record's function."""
    for kind, impl in rec.impls.items():
        runtime = host_rt.HostRuntime if kind == HOST else rank_rt.RankContext
        assert getattr(runtime, impl.__name__, None) is impl, \
            f"{rec.name}: {runtime.__name__}.{impl.__name__} is not {impl.__qualname__}"


@pytest.mark.parametrize("rec", RECORDS, ids=_id)
def test_static_parameters_exist(rec):
    params = set(rec.signature.parameters)
    assert set(rec.static) <= params, f"{rec.name}: static {rec.static} not in {params}"


def test_record_names_are_unique():
    names = [r.name for r in RECORDS]
    assert len(names) == len(set(names))


# ------------------------------------------------------------------ surface spellings
def spellings() -> dict:
    """Every way the public surface spells each record: {record name: {"pl.load", ...}}."""
    out = {r.name: set() for r in RECORDS}
    for root_name, root in (("pl", pl), ("pld", pld)):
        for attr, value in vars(root).items():
            if attr.startswith("_"):
                continue                        # private imports are not a spelling
            rec = registry.lookup(value)
            if rec is not None:
                out[rec.name].add(f"{root_name}.{attr}")
            elif isinstance(value, SimpleNamespace):
                for attr2, value2 in vars(value).items():
                    rec = registry.lookup(value2)
                    if rec is not None:
                        out[rec.name].add(f"{root_name}.{attr}.{attr2}")
    return out


SPELLINGS = spellings()


@pytest.mark.parametrize("rec", RECORDS, ids=_id)
def test_surface_spells_each_record_exactly_as_declared(rec):
    """The pl / pld namespaces offer a record under its canonical name and its
    declared aliases (e.g. the 2-segment pld short forms), and nothing else."""
    assert SPELLINGS[rec.name] == set(rec.spellings), \
        f"{rec.name}: the surface spells it {sorted(SPELLINGS[rec.name])}, the record declares " \
        f"{sorted(rec.spellings)}"


def test_pld_short_forms_are_the_reference_list():
    short = sorted(s for r in RECORDS for s in r.spellings if s.startswith("pld.")
                   and s.count(".") == 1)
    assert short == ["pld.all_gather", "pld.all_reduce", "pld.all_to_all", "pld.all_to_all_v",
                     "pld.alloc_window_buffer", "pld.barrier", "pld.broadcast",
                     "pld.get_comm_ctx", "pld.nranks", "pld.rank", "pld.reduce_scatter",
                     "pld.remote_load", "pld.remote_store", "pld.window", "pld.world_size"]


def test_pld_exports_exactly_the_reference_names():
    assert sorted(pld.__all__) == sorted(
        ["AtomicType", "CommCtx", "CommCtxType", "DistributedTensor", "NotifyOp", "ReduceOp",
         "WaitCmp", "all_gather", "all_reduce", "all_to_all", "all_to_all_v",
         "alloc_window_buffer", "barrier", "broadcast", "get_comm_ctx", "nranks", "rank",
         "reduce_scatter", "remote_load", "remote_store", "system", "tensor", "tile", "window",
         "world_size"])
    assert all(hasattr(pld, n) for n in pld.__all__)


# ------------------------------------------------------------------ implementations
@pytest.mark.parametrize("rec", RECORDS, ids=_id)
def test_stub_and_implementation_signatures_agree(rec):
    for kind, impl in rec.impls.items():
        why = registry.signature_mismatch(rec, impl)
        assert why is None, f"{rec.name} ({kind}) -> {impl.__qualname__}: {why}"


def test_signature_check_can_fail():
    rec = pld.system.notify.record

    def reordered(self, target, offsets, peer, value, op):
        pass

    def keyword_only(self, target, peer, offsets, value, *, op):
        pass

    def other_default(self, target, peer, offsets, value, op=1):
        pass

    def fine(self, target, peer, offsets, value, op):
        pass

    assert "expected" in registry.signature_mismatch(rec, reordered)
    assert "by position" in registry.signature_mismatch(rec, keyword_only)
    assert "defaults to" in registry.signature_mismatch(rec, other_default)
    assert registry.signature_mismatch(rec, fine) is None
    wait = pld.system.wait.record          # a WAIT takes the call's span id last
    assert registry.signature_mismatch(wait, lambda self, signal, offsets, expected, cmp: 0)
    cast = pl.cast.record

    def cast_other_mode(self, input, target_type, mode="floor"):
        pass
    assert "defaults to" in registry.signature_mismatch(cast, cast_other_mode)


# ------------------------------------------------------------------ test coverage
def _test_sources():
    me = os.path.abspath(__file__)
    for root, _, files in os.walk(TESTS):
        for f in files:
            path = os.path.join(root, f)
            if f.endswith(".py") and path != me and f != "conftest.py":
                with open(path, encoding="utf-8") as fh:
                    yield path, fh.read()


def _called(source: str, spelling: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(spelling)}\s*\(", source) is not None


def _coverage():
    pos = {r.name: [] for r in RECORDS}
    for path, text in _test_sources():
        if NEGATIVE_FILE.search(os.path.basename(path)):
            continue
        for rec in RECORDS:
            if any(_called(text, s) for s in SPELLINGS[rec.name]):
                pos[rec.name].append(os.path.relpath(path, TESTS))
    return pos


POSITIVE = _coverage()


@pytest.mark.parametrize("rec", RECORDS, ids=_id)
def test_record_has_a_positive_test(rec):
    assert POSITIVE[rec.name], (
        f"no positive test calls {rec.name} (spellings {sorted(SPELLINGS[rec.name])}) in any "
        f"test under tests/ outside the bad/failure programs")


def _raised_at_op_calls():
    """Record name -> the compile-error cases whose expected error code is
    actually raised at a line that calls that op."""
    hits = {r.name: [] for r in RECORDS}
    for case in compile_errors.CASES:
        obj, code = case[0], case[1]
        try:
            compile_errors.program_for(obj)(*compile_errors.host_args(),
                                            config=compile_errors.config())
        except UserError as e:
            diags = e.diagnostics
        else:
            continue
        for d in diags:
            if d.code != code or d.span is None:
                continue
            text = linecache.getline(d.span.file, d.span.line)
            for rec in RECORDS:
                if any(_called(text, sp) for sp in SPELLINGS[rec.name]):
                    hits[rec.name].append(f"{code} at line {d.span.line}")
    return hits


@pytest.fixture(scope="module")
def negative_hits():
    return _raised_at_op_calls()


@pytest.mark.parametrize("rec", RECORDS, ids=_id)
def test_record_has_a_negative_test(rec, negative_hits):
    """Some compile-error case raises its error code at a call of this op."""
    assert negative_hits[rec.name], (
        f"no compile-error case in test_compile_errors.CASES raises its code at a call of "
        f"{rec.name} (spellings {sorted(SPELLINGS[rec.name])})")


def test_coverage_scan_can_fail():
    """The scanner does not match names inside longer identifiers or other ops."""
    assert _called("x = pl.load(a)", "pl.load")
    assert not _called("x = pl.loader(a)", "pl.load")
    assert not _called("x = my_pl.load(a)", "pl.load")
    assert not _called("pld.tile.remote_store(t)", "pld.remote_store")
    assert _called("pld.tile.remote_store (t)", "pld.tile.remote_store")


# ------------------------------------------------------------------ error codes
TABLES = ("CODES", "FIXES")        # errors.py's tables keyed by code: they raise nothing


def _raised_codes():
    """Every "TCnnn" string constant in tilecomm sources, outside the CODES and
    FIXES tables."""
    found = {}
    for root, _, files in os.walk(PKG):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(root, f)
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read(), path)
            table = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id in TABLES for t in node.targets):
                    table.update(id(k) for k in node.value.keys)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                        re.fullmatch(r"TC\d{3}", node.value) and id(node) not in table:
                    found.setdefault(node.value, []).append(
                        f"{os.path.relpath(path, PKG)}:{node.lineno}")
    return found


RAISED = _raised_codes()


def test_codes_table_is_well_formed():
    assert all(re.fullmatch(r"TC\d{3}", c) for c in CODES)
    assert all(isinstance(v, str) and v.strip() for v in CODES.values())


def test_every_code_has_one_fix_and_every_fix_a_code():
    """The error reference prints a fix beside each meaning."""
    assert set(FIXES) == set(CODES), (f"codes without a fix: {sorted(set(CODES) - set(FIXES))}; "
                                      f"fixes of no code: {sorted(set(FIXES) - set(CODES))}")
    assert all(isinstance(v, str) and v.strip() and not v.endswith(".") for v in FIXES.values())


def test_every_raised_code_is_declared():
    undeclared = {c: where for c, where in RAISED.items() if c not in CODES}
    assert not undeclared, f"codes raised but missing from errors.CODES: {undeclared}"


def test_every_declared_code_is_raised():
    unused = sorted(set(CODES) - set(RAISED))
    assert not unused, f"codes in errors.CODES that nothing raises: {unused}"


def test_code_scan_finds_known_sites():
    """Sanity check of the scanner itself: known raise sites are seen."""
    assert any(w.startswith("frontend/") for w in RAISED["TC301"])
    assert any(w.startswith("runtime/rank/context.py") for w in RAISED["TC501"])


def test_an_op_usable_somewhere_needs_an_implementation_there():
    with pytest.raises(AssertionError, match="no implementation"):
        @registry.op("pl.no_such_op_for_this_test", where=(HOST, INCORE),
                     kernel=rank_rt.RankContext.load)
        def no_such_op(tensor):
            """Never registered: it has no HOST implementation."""
    assert all(r.name != "pl.no_such_op_for_this_test" for r in registry.records())


def test_the_collectives_are_one_list_the_registry_and_the_runtime_agree_on():
    """``collectives.names.NAMES`` names every collective record, and each has
    an algorithm, a rank-side and a HOST implementation and a HOST builtin of
    that name; a collective added to only one place fails here."""
    from tilecomm.collectives import algorithms
    from tilecomm.collectives.names import COLLECTIVES, NAMES
    from tilecomm.runtime.rank.collective_calls import BUILTIN_PREFIX, BUILTINS
    assert sorted(r.name for r in RECORDS if r.collective) == sorted(COLLECTIVES)
    for name in NAMES:
        rec = next(r for r in RECORDS if r.name == f"pld.tensor.{name}")
        assert rec.impls[INCORE].__name__ == name and rec.impls[HOST].__name__ == name
        assert BUILTINS[BUILTIN_PREFIX + name] is getattr(algorithms, name)
    assert len(BUILTINS) == len(NAMES)
