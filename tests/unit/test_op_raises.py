"""Every op record's ``raises`` against the codes its code can raise.

``reachable_codes`` reads the source of the op's type rule and of its
implementations, follows the calls it can resolve (module functions by name,
``self.method`` on the implementation's class, the rule's ``c.method`` on
``CallCheck``, ``module.function``) and collects every code literal passed as
an error's code, plus the default code of a helper called without one.  It
under-approximates (a call through an attribute of an attribute, or through
a function passed as a value, is not followed), so the check is one way:
what it finds must be declared.  Codes declared beyond it must still be raised
somewhere in the package (the verifier, the collective protocol, the wait
deadline), and the compile-error cases check the other way round
(``test_compile_errors``: an error raised inside a rule carries a declared
code)."""
import ast
import inspect
import pathlib
import re
import sys
import textwrap
import types

import pytest

import tilecomm
from tilecomm.cli.ops import describe
from tilecomm.errors import CODES
from tilecomm.ops.check import CallCheck
from tilecomm.ops.registry import EVERY_CALL_RAISES, op, records

CODE = re.compile(r"^TC\d{3}$")
PACKAGE = pathlib.Path(tilecomm.__file__).parent
# modules whose functions the scan follows (this one for its own self-test)
SCANNED = ("tilecomm", __name__)


def _code_default(fn):
    try:
        p = inspect.signature(fn).parameters.get("code")
    except (TypeError, ValueError):
        return None
    if p is not None and isinstance(p.default, str) and CODE.match(p.default):
        return p.default
    return None


def _owner(fn):
    """The class a method was defined in, or None for a module function."""
    parts = fn.__qualname__.split(".")
    return getattr(sys.modules[fn.__module__], parts[0], None) if len(parts) == 2 else None


def _literal(node, bound):
    """The code a call passes (keyword ``code=`` or a positional literal), or None."""
    for k in node.keywords:
        if k.arg == "code":
            if isinstance(k.value, ast.Constant) and CODE.match(str(k.value.value)):
                return k.value.value
            if isinstance(k.value, ast.Name) and k.value.id == "code":
                return bound
    for a in node.args:
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and CODE.match(a.value):
            return a.value
    return None


def _callee(node, g, cls):
    f = node.func
    if isinstance(f, ast.Name):
        return g.get(f.id)
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        base = f.value.id
        if base == "self" and cls is not None:
            return getattr(cls, f.attr, None)
        if base == "c" and hasattr(CallCheck, f.attr):
            return getattr(CallCheck, f.attr)
        if isinstance(g.get(base), types.ModuleType):
            return getattr(g[base], f.attr, None)
    return None


def reachable_codes(fn, bound=None, seen=None) -> set:
    """Codes ``fn`` and the tilecomm functions it calls raise (``bound``: the
    value of a ``code`` parameter, where ``fn`` passes one on)."""
    seen = set() if seen is None else seen
    fn = inspect.unwrap(fn)
    if not isinstance(fn, types.FunctionType) or not fn.__module__.startswith(SCANNED):
        return set()
    if (fn.__code__, bound) in seen:
        return set()
    seen.add((fn.__code__, bound))
    found = set()
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    cls = _owner(fn)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        lit = _literal(node, bound)
        if lit:
            found.add(lit)
        callee = _callee(node, fn.__globals__, cls)
        if isinstance(callee, types.FunctionType):
            default = _code_default(callee)
            if default and not lit:
                found.add(default)
            found |= reachable_codes(callee, lit or default, seen)
    return found


def op_codes(rec) -> set:
    found = reachable_codes(rec.rule) if rec.rule else set()
    if rec.static:
        found |= reachable_codes(CallCheck.static_params)
    for impl in rec.impls.values():
        found |= reachable_codes(impl)
    return found


RECORDS = sorted(records(), key=lambda r: r.name)


def _raised_in_package() -> set:
    text = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py") if p.name != "errors.py")
    return set(re.findall(r"\"(TC\d{3})\"", text))


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r.name)
def test_every_code_the_op_can_raise_is_declared(rec):
    missing = sorted(op_codes(rec) - set(rec.raises))
    assert not missing, f"{rec.name} can raise {missing}; add them to its raises="


def test_declared_codes_beyond_the_scan_are_raised_somewhere():
    raised = _raised_in_package()
    for rec in RECORDS:
        for code in rec.raises:
            assert code in CODES
            assert code in raised, f"{rec.name} declares {code}, which nothing raises"
    assert set(EVERY_CALL_RAISES) <= raised


def _helper(c, code="TC209"):
    c.value_error("x", code=code)


def _rule(c):
    c.type_error("x", code="TC204")
    _helper(c)
    _helper(c, code="TC216")
    c.integer("n")              # CallCheck's own helper, reached through c


def test_the_scan_finds_what_a_rule_raises():
    """The scan itself: a literal, a helper's default and a code passed on."""
    assert {"TC204", "TC209", "TC216"} <= reachable_codes(_rule)
    assert reachable_codes(CallCheck.integer) <= reachable_codes(_rule)
    assert reachable_codes(CallCheck.integer)
    assert not reachable_codes(lambda c: None)


def test_a_record_declaring_an_unknown_code_is_refused():
    with pytest.raises(AssertionError, match="TC999"):
        op("test.bad_raises", where=("incore",), kernel=lambda self: None,
           raises=("TC999",))(lambda: None)


def test_ops_lists_the_codes_with_their_meaning():
    rec = next(r for r in RECORDS if r.name == "pld.system.wait")
    text = "\n".join(describe(rec))
    for code in rec.raises + EVERY_CALL_RAISES:
        assert f"{code}  {CODES[code]}" in text
    assert "TC504" in rec.raises           # a wait can time out (RunConfig.wait_timeout_s)
