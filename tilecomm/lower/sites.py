"""Which calls of an InCore kernel take the call-site data path
(``runtime/rank/tile/site_ops.py``), and whether a load there may be a view.

A loaded tile is a value snapshot.  A load may return the source region
itself only where that cannot be told apart: the load is an operand of an
elementwise op or a cast (both make a new array) or the tile of a
``pl.store``, in the same expression, and
every operand of that consumer is *pure* -- names, constants, arithmetic on
scalars, other loads and elementwise ops on them.  Between the view's making
and its one use this rank then runs nothing that writes memory or
synchronises; a write by this rank would have to be one of those, and a
peer's write that the program orders after the load needs a notify of this
rank first (a write not ordered either way is a race, whatever the copy
would have shown).  A load whose tile is bound to a name stays a copy."""
from __future__ import annotations

from ..ir import nodes as N
from ..runtime.rank.context import RankContext
from ..runtime.rank.tile.site_ops import BINARY_NAMES

LOADS = (RankContext.load, RankContext.remote_load)
BINARY = {getattr(RankContext, n): i for i, n in enumerate(BINARY_NAMES)}
# ops that neither write memory nor synchronise: they may sit beside a view
_PURE = set(LOADS) | set(BINARY) | {RankContext.cast, RankContext.div, RankContext.const,
                                    RankContext.smin, RankContext.smax, RankContext.rank,
                                    RankContext.nranks, RankContext.get_comm_ctx}


def _is_none(e) -> bool:
    return e is None or isinstance(e, N.Const) and e.value is None


def _whole(load) -> bool:
    """A load without a valid extent or clamping (those build a new tile)."""
    clamp = load.args.get("clamp")
    return _is_none(load.args.get("valid_shape")) and \
        (clamp is None or isinstance(clamp, N.Const) and not clamp.value)


def _is_zero(e) -> bool:
    return isinstance(e, N.Const) and not e.value


def pure(e, impl_of) -> bool:
    if e is None or isinstance(e, (N.Const, N.Var)):
        return True
    if isinstance(e, (N.BinOp, N.Compare)):
        return pure(e.left, impl_of) and pure(e.right, impl_of)
    if isinstance(e, N.UnaryOp):
        return pure(e.operand, impl_of)
    if isinstance(e, N.BoolOp):
        return all(pure(v, impl_of) for v in e.values)
    if isinstance(e, (N.ListExpr, N.TupleExpr)):
        return all(pure(v, impl_of) for v in e.items)
    if isinstance(e, N.Call):
        return impl_of(e) in _PURE and all(pure(a, impl_of) for a in e.args.values())
    return False


class SitePlan:
    """Per program: numbers call sites; per call, which form it is lowered to."""

    def __init__(self):
        self.count = 0
        self.views: set = set()          # id() of load calls lowered as views
        self.fusable: set = set()        # id() of stores of an elementwise result
        self.scanned: set = set()        # id() of calls already looked at

    def scan_once(self, call, impl_of) -> None:
        """Scan the outermost call of an expression (emitted before what is
        under it); calls under one already scanned are skipped."""
        if id(call) not in self.scanned:
            self.scan(call, impl_of)

    def next_site(self) -> int:
        self.count += 1
        return self.count

    def scan(self, e, impl_of) -> None:
        """Mark the loads under ``e`` that may be views (see the module doc)."""
        if isinstance(e, N.Call):
            self.scanned.add(id(e))
            impl = impl_of(e)
            operands = ()
            if impl in BINARY:
                operands = (e.args["lhs"], e.args["rhs"])
            elif impl is RankContext.cast:          # always a new array (astype copies)
                operands = (e.args["input"],)
            elif impl is RankContext.store and _is_none(e.args["shapes"]) and \
                    _is_zero(e.args["atomic"]):
                tile = e.args["tile"]
                operands = (e.args["tile"],)
                if isinstance(tile, N.Call) and impl_of(tile) in BINARY:
                    # computed into the stored region: whatever surrounds it,
                    # its operands are values nothing else can change
                    self.fusable.add(id(e))
                    operands = (tile.args["lhs"], tile.args["rhs"])
            if operands and all(pure(a, impl_of) for a in e.args.values()):
                for o in operands:
                    if isinstance(o, N.Call) and impl_of(o) in LOADS and _whole(o):
                        self.views.add(id(o))
            for a in e.args.values():
                self.scan(a, impl_of)
            return
        for child in _children(e):
            self.scan(child, impl_of)


def _children(e):
    if isinstance(e, (N.BinOp, N.Compare)):
        return (e.left, e.right)
    if isinstance(e, N.UnaryOp):
        return (e.operand,)
    if isinstance(e, N.BoolOp):
        return e.values
    if isinstance(e, (N.ListExpr, N.TupleExpr)):
        return e.items
    if isinstance(e, N.Index):
        return [e.value] + [i for i in e.items if isinstance(i, N.Expr)]
    if isinstance(e, N.FuncCall):
        return e.args
    return ()


# ------------------------------------------------------------------ named tiles
# ``t = pl.load(...)`` may be a view too, where every later reference to ``t``
# in the whole function lies in a *quiet* stretch of the same block right
# after it: statements that neither write nor synchronise (pure expressions,
# loops and branches of such), the stretch's last statement possibly a store
# of ``t`` itself.  ``t`` is read there only as an operand of a pure op (never
# copied into another name, indexed, returned or passed to a function), so the
# view is used up before anything can write its source.

def _walk(e):
    """Every expression node under ``e`` (``e`` included)."""
    yield e
    if isinstance(e, N.Call):
        for a in e.args.values():
            if a is not None:
                yield from _walk(a)
    else:
        for c in _children(e):
            if c is not None:
                yield from _walk(c)


def calls_in(stmts):
    """Every op call in a block of statements, nested blocks included."""
    for s in stmts:
        exprs, blocks = _stmt_exprs(s)
        for e in exprs:
            for x in _walk(e):
                if isinstance(x, N.Call):
                    yield x
        for b in blocks:
            yield from calls_in(b)


def _stmt_exprs(s):
    """(expressions, nested blocks) of a statement."""
    if isinstance(s, N.Assign):
        return [s.value], []
    if isinstance(s, N.ExprStmt):
        return [s.expr], []
    if isinstance(s, N.If):
        return [s.cond], [s.body, s.orelse]
    if isinstance(s, N.For):
        exprs = [s.start, s.stop, s.step] + list(s.init)
        if isinstance(s, N.While):
            exprs.append(s.cond)
        return [e for e in exprs if e is not None], [s.body]
    if isinstance(s, N.StoreIndex):
        return [s.target, s.value], []
    if isinstance(s, N.Yield):
        return list(s.values), []
    if isinstance(s, N.Return):
        return [s.value] if s.value is not None else [], []
    if isinstance(s, N.TaskScope):
        return list(s.call.args) + list(s.deps), []
    return [], []


def _mentions(s, name) -> int:
    """References to ``name`` in statement ``s`` (reads and bindings)."""
    exprs, blocks = _stmt_exprs(s)
    n = sum(1 for e in exprs for x in _walk(e) if isinstance(x, N.Var) and x.name == name)
    if isinstance(s, N.Assign):
        n += s.targets.count(name)
    if isinstance(s, N.For):
        n += (s.var == name) + s.carried.count(name) + s.yield_targets.count(name)
    if isinstance(s, N.Yield):
        n += s.targets.count(name) + s.carried.count(name)
    return n + sum(_mentions(b, name) for blk in blocks for b in blk)


def _reads_only_as_operand(e, name, impl_of) -> bool:
    """``name`` appears under ``e`` only as a direct argument of pure calls."""
    if isinstance(e, N.Var):
        return e.name != name
    if isinstance(e, N.Call):
        return all((isinstance(a, N.Var) and impl_of(e) in _PURE) or
                   _reads_only_as_operand(a, name, impl_of)
                   for a in e.args.values() if a is not None)
    return all(_reads_only_as_operand(c, name, impl_of) for c in _children(e) if c is not None)


def _quiet(s, name, impl_of) -> bool:
    if isinstance(s, N.Assign):
        return pure(s.value, impl_of) and _reads_only_as_operand(s.value, name, impl_of)
    if isinstance(s, N.ExprStmt):
        return pure(s.expr, impl_of) and _reads_only_as_operand(s.expr, name, impl_of)
    if isinstance(s, N.If):
        return pure(s.cond, impl_of) and _reads_only_as_operand(s.cond, name, impl_of) and \
            all(_quiet(b, name, impl_of) for b in s.body + s.orelse)
    if type(s) is N.For:
        return not s.carried and s.kind == "range" and \
            all(pure(e, impl_of) and _reads_only_as_operand(e, name, impl_of)
                for e in (s.start, s.stop, s.step)) and \
            all(_quiet(b, name, impl_of) for b in s.body)
    return False


def _final_store(s, name, impl_of) -> bool:
    """``pl.store(name, <pure offsets>, <output>)`` as a statement."""
    e = s.value if isinstance(s, N.Assign) else s.expr if isinstance(s, N.ExprStmt) else None
    if not (isinstance(e, N.Call) and impl_of(e) is RankContext.store):
        return False
    tile = e.args["tile"]
    rest = [a for k, a in e.args.items() if k != "tile"]
    return isinstance(tile, N.Var) and tile.name == name and \
        all(pure(a, impl_of) and _reads_only_as_operand(a, name, impl_of) for a in rest)


def _scan_named(plan: SitePlan, blocks, total: dict, impl_of) -> None:
    for blk in blocks:
        for i, s in enumerate(blk):
            if isinstance(s, N.Assign) and len(s.targets) == 1 and \
                    isinstance(s.value, N.Call) and impl_of(s.value) in LOADS and \
                    _whole(s.value):
                name = s.targets[0]
                uses = [j for j in range(i + 1, len(blk)) if _mentions(blk[j], name)]
                last = uses[-1] if uses else i
                seen = sum(_mentions(b, name) for b in blk[i:last + 1])
                if seen == total(name) and \
                        all(_quiet(b, name, impl_of) for b in blk[i + 1:last]) and \
                        (last == i or _quiet(blk[last], name, impl_of) or
                         _final_store(blk[last], name, impl_of)):
                    plan.views.add(id(s.value))
            _scan_named(plan, _stmt_exprs(s)[1], total, impl_of)


def scan_function(plan: SitePlan, fn, impl_of) -> None:
    """Mark the named loads of ``fn`` that may be views."""
    counts: dict = {}

    def total(name):
        if name not in counts:
            counts[name] = sum(_mentions(s, name) for s in fn.body)
        return counts[name]
    _scan_named(plan, [fn.body], total, impl_of)
