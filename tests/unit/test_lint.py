"""The protocol lint (TC701-TC711): each rule fires on its pattern, at the
line the program marks, and stays silent on near misses; no rule fires on
the project's examples; RunConfig.lint / $TILECOMM_LINT say what a finding
does at compile time."""
import glob
import inspect
import os
import re
import types
import warnings

import pytest

import lint_programs as L
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.cli.programs import arg_types, load_module, targets
from tilecomm.compiler import CompiledProgram
from tilecomm.errors import CODES, ConfigError, LintError, TilecommWarning
from tilecomm.ir.kinds import HOST
from tilecomm.runtime.config import LINT_DEFAULT_MAX_WORLD, DistributedConfig, RunConfig
from tilecomm.verify import LINT_RULES

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def config(n=L.W, **kw):
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))), **kw)


def lint_of(kernel):
    _, found = CompiledProgram(L.program(kernel), config=config(lint="off")).check()
    return found


def marked_line(kernel, code):
    lines, first = inspect.getsourcelines(kernel)
    return next(first + i for i, text in enumerate(lines) if f"# W:{code}" in text)


FIRING = [(code, k) for code, ks in L.FIRES.items() for k in ks]
NEAR = [(code, k) for code, ks in L.NEAR_MISSES.items() for k in ks]


@pytest.mark.parametrize("code,kernel", FIRING, ids=[f"{c}-{k.__name__}" for c, k in FIRING])
def test_rule_fires_on_its_pattern_at_the_marked_line(code, kernel):
    found = lint_of(kernel)
    assert [(w.code, w.span.line) for w in found] == [(code, marked_line(kernel, code))]
    w = found[0]
    assert w.hint and w.span.file == L.__file__
    assert str(w).startswith(f"{w.span}: warning[{code}]: ")


@pytest.mark.parametrize("code,kernel", NEAR, ids=[f"{c}-{k.__name__}" for c, k in NEAR])
def test_rule_is_silent_on_a_near_miss(code, kernel):
    assert lint_of(kernel) == []


def test_every_lint_rule_has_a_code_a_hint_and_tests_both_ways():
    codes = {r.code for r in LINT_RULES}
    assert codes == {c for c in CODES if c.startswith("TC7")} == set(L.FIRES) == \
        set(L.NEAR_MISSES)
    assert len({r.name for r in LINT_RULES}) == len(LINT_RULES)
    assert all(r.doc for r in LINT_RULES)


def test_overshooting_adds_from_one_rank_in_a_loop_count_too():
    """One rank adding several times is several notifies (the loop is unrolled)."""

    @pl.jit.incore
    def k(sig: L.SIG, data: L.DATA, other: L.SIG, x: L.X, y: L.Y):
        me = pld.rank(pld.get_comm_ctx(sig))
        if me == 1:
            for i in pl.range(3):
                pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=L.ADD)
        if me == 0:
            pld.system.wait(sig, offsets=[0, 0], expected=2, cmp=L.EQ)
        return y

    assert [w.code for w in lint_of(k)] == ["TC702"]


# programs an example keeps broken on purpose, to show what reports it
BROKEN_ON_PURPOSE = {("race_report.py", "racy_main")}


def _example_programs():
    for path in sorted(glob.glob(os.path.join(EXAMPLES, "*.py"))):
        for t in targets(load_module(path)):
            if t.entry.kind == HOST and (os.path.basename(path), t.name) not in BROKEN_ON_PURPOSE:
                yield os.path.basename(path), t


@pytest.mark.parametrize("n", [2, 4])
def test_no_rule_fires_on_the_examples(n):
    """The examples' protocols are right: a finding here is a false positive.
    Their pl.dynamic dims are the world size, as their own run() binds them."""
    checked = 0
    for name, t in _example_programs():
        cp = CompiledProgram(t.entry, config=config(n, lint="off"), self_ns=t.self_ns)
        _, found = cp.check(arg_types(t.entry, {"NR": n}))
        assert found == [], f"{name}: {[str(w) for w in found]}"
        checked += 1
    assert checked >= 20


# examples whose programs a factory builds: how to build them for n ranks
FACTORIES = {
    "all_to_all_v.py": lambda m, n: m.build(n),
    "all_to_all_v_host.py": lambda m, n: m.build(n),
    "allreduce_quickstart.py": lambda m, n: m.build(n),
    "allreduce_ring.py": lambda m, n: m.build(n),
    "broadcast.py": lambda m, n: m.build(n - 1),
    "host_collectives.py": lambda m, n: m.build(n - 1),
    "moe_dispatch_combine.py": lambda m, n: m.build(n, m.SMALL),
    "sharded_gemm.py": lambda m, n: m.build(n),
    "worker_prefill_decode.py": lambda m, n: m.build(n),
    "worker_resident_weights.py": lambda m, n: m.build(n),
    "worker_subworker_callback.py": lambda m, n: m.build(n),
    "race_report.py": lambda m, n: m.build(m.fixed),
}


def _lint_built(module, built, n):
    objs = built if isinstance(built, tuple) else (built,)
    ns = types.SimpleNamespace(__name__=module.__name__,
                               **{f"p{i}": o for i, o in enumerate(objs)})
    found = []
    for t in targets(ns):
        if t.entry.kind == HOST:
            cp = CompiledProgram(t.entry, config=config(n, lint="off"), self_ns=t.self_ns)
            found += cp.check(arg_types(t.entry, {"NR": n}))[1]
    return found


@pytest.mark.parametrize("n", [2, 4])
def test_no_rule_fires_on_the_examples_factories(n):
    for name, make in FACTORIES.items():
        m = load_module(os.path.join(EXAMPLES, name))
        found = _lint_built(m, make(m, n), n)
        assert found == [], f"{name}: {[str(w) for w in found]}"


def test_the_race_report_examples_bug_is_found():
    """race_report.py's racy kernel notifies before it stores: TC704, at its line."""
    m = load_module(os.path.join(EXAMPLES, "race_report.py"))
    found = _lint_built(m, m.build(m.racy), 2)
    line = next(i for i, text in enumerate(open(m.__file__).read().splitlines(), 1)
                if "pld.system.notify(flag, peer=1" in text)
    assert [(w.code, w.span.line) for w in found] == [("TC704", line)]


def test_lint_error_raises_at_compile_time_before_any_rank():
    main = L.program(L.set_then_add)
    with pytest.raises(LintError) as ei:
        main.compile(config=config(lint="error"))
    e = ei.value
    assert e.code == "TC701" and e.span.line == marked_line(L.set_then_add, "TC701")
    assert isinstance(e, ValueError) and "error[TC701]" in str(e)


def test_lint_warn_shows_each_finding_once_per_source_line():
    main = L.program(L.notify_before_store)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("default")
        main.compile(config=config(lint="warn"))
        main.compile(config=config(lint="warn", spin_iters=10))   # a second build
    lint = [w for w in got if issubclass(w.category, TilecommWarning)]
    assert len(lint) == 1
    w = lint[0]
    assert w.message.code == "TC704" and w.filename == L.__file__
    assert w.lineno == marked_line(L.notify_before_store, "TC704")


def test_lint_off_and_the_environment(monkeypatch):
    main = L.program(L.set_then_add)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        main.compile(config=config(lint="off"))
    assert not [w for w in got if issubclass(w.category, TilecommWarning)]
    monkeypatch.setenv("TILECOMM_LINT", "error")
    assert RunConfig().resolved_lint() == "error"
    with pytest.raises(LintError):
        L.program(L.set_then_add).compile(config=config())
    monkeypatch.setenv("TILECOMM_LINT", "loud")
    with pytest.raises(ConfigError, match=re.escape("TILECOMM_LINT must be one of")):
        RunConfig().resolved_lint()


def test_bad_lint_value_is_a_config_error():
    with pytest.raises(ConfigError) as ei:
        RunConfig(lint="warnings")
    assert ei.value.code == "TC402" and "'warnings'" in str(ei.value)
    assert ei.value.span.file == __file__


def test_unasked_the_lint_checks_programs_up_to_its_world_limit(monkeypatch):
    limit = LINT_DEFAULT_MAX_WORLD
    monkeypatch.delenv("TILECOMM_LINT", raising=False)
    assert RunConfig().resolved_lint(limit) == "warn"
    assert RunConfig().resolved_lint(limit + 1) == "off"
    assert RunConfig(lint="warn").resolved_lint(limit + 1) == "warn"
    monkeypatch.setenv("TILECOMM_LINT", "error")
    assert RunConfig().resolved_lint(limit + 1) == "error"
