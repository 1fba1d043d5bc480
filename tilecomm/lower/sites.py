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
from ..ir import walk
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


def plain_store(call) -> bool:
    """A ``pl.store`` call without a shape or atomic mode."""
    return _is_none(call.args.get("shapes")) and _is_zero(call.args.get("atomic"))


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
        # accumulations computed in place (see "accumulations" below), by id():
        # the statement binding the accumulator -> (its handle's name, the
        # store call, names of the tensors read in between); each step's
        # elementwise call and the final store call -> the handle's name
        self.accum_begin: dict = {}
        self.accum_steps: dict = {}
        self.accum_store: dict = {}

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


# ------------------------------------------------------------------ accumulations
# ``acc = <anything>``, then a stretch of statements that neither write nor
# synchronise, in which ``acc`` is only ever rebound as ``acc = <op>(acc, X)``
# (or ``<op>(X, acc)``) for an elementwise ``<op>`` and pure ``X``, then
# ``pl.store(acc, offsets, out)``: every step may compute straight into the
# stored region R of ``out`` instead of a new tile, and the store then has
# nothing left to copy.  What could tell the two apart is a read of R
# between the first step and the store:
#
# * by this rank through ``acc``: each step reads ``acc`` -- the latest value,
#   which is what R holds (numpy gives the same values when an operand
#   overlaps the output); ``acc`` is named nowhere else in the function, so
#   no other name holds it and nothing reads it after the store;
# * by this rank through another name: the only reads in the stretch are its
#   loads (pure expressions read nothing else), and the tensors they read are
#   names the stretch does not rebind, listed for the runtime, which takes
#   the path only if none of them shares memory with ``out``
#   (``SiteOps.accum_begin``; remote loads of this rank's own copy read the
#   memory of the window's local array, which that check covers);
# * by a peer (``out`` a window): the stretch has no synchronisation, so a
#   peer's read is ordered neither before nor after the store's write
#   unless it is ordered outside the whole stretch -- a race either way, as
#   with a copy.
#
# ``offsets`` and ``out`` must be constants or names the stretch does not
# bind: the runtime takes the region at the first step, and it must be the
# store's (``walk.assigned`` finds what it binds).  Anything else keeps the
# copying steps.


def _step(s, name, impl_of):
    """The elementwise call of ``name = <op>(name, X)`` / ``<op>(X, name)``, or None."""
    if not (isinstance(s, N.Assign) and list(s.targets) == [name] and isinstance(s.value, N.Call)
            and impl_of(s.value) in BINARY):
        return None
    lhs, rhs = s.value.args["lhs"], s.value.args["rhs"]
    for acc, other in ((lhs, rhs), (rhs, lhs)):
        if isinstance(acc, N.Var) and acc.name == name and pure(other, impl_of) and \
                not any(isinstance(x, N.Var) and x.name == name for x in _walk(other)):
            return s.value
    return None


def _stretch(s, name, impl_of, steps: list) -> bool:
    """``s`` may stand between the binding of ``name`` and its store: quiet,
    naming ``name`` only in accumulation steps (collected in ``steps``)."""
    call = _step(s, name, impl_of)
    if call is not None:
        steps.append(call)
        return True
    def clean(e):                     # pure, and not naming the accumulator
        return pure(e, impl_of) and not any(isinstance(x, N.Var) and x.name == name
                                            for x in _walk(e))
    if isinstance(s, N.Assign):
        return name not in s.targets and clean(s.value)
    if isinstance(s, N.ExprStmt):
        return clean(s.expr)
    if isinstance(s, N.If):
        return clean(s.cond) and \
            all(_stretch(b, name, impl_of, steps) for blk in _live(s) for b in blk)
    if type(s) is N.For:
        return not s.carried and s.kind == "range" and s.var != name and \
            all(clean(e) for e in (s.start, s.stop, s.step)) and \
            all(_stretch(b, name, impl_of, steps) for b in s.body)
    return False


def _accum_store(s, name, impl_of):
    """The call of a final ``pl.store(name, offsets, out)`` whole and plain, or None."""
    e = s.value if isinstance(s, N.Assign) else s.expr if isinstance(s, N.ExprStmt) else None
    if not (isinstance(e, N.Call) and impl_of(e) is RankContext.store):
        return None
    tile, offs, out = e.args["tile"], e.args["offsets"], e.args["output_tensor"]
    if not (isinstance(tile, N.Var) and tile.name == name and isinstance(out, N.Var) and
            _is_none(e.args.get("shapes")) and _is_zero(e.args.get("atomic"))):
        return None
    items = offs.items if isinstance(offs, (N.ListExpr, N.TupleExpr)) else None
    if items is None or not all(isinstance(o, (N.Const, N.Var)) for o in items):
        return None
    return e


_FOLD = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
         "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _constant(e):
    """(True, value) of a condition fixed at compile time -- a constant, or a
    comparison of constants (a closure's value against a literal) -- else
    (False, None)."""
    if isinstance(e, N.Const):
        return True, e.value
    if isinstance(e, N.Compare) and isinstance(e.left, N.Const) and \
            isinstance(e.right, N.Const) and e.op in _FOLD:
        return True, _FOLD[e.op](e.left.value, e.right.value)
    return False, None


def _live(s):
    """The blocks of ``If`` ``s`` that may run."""
    fixed, value = _constant(s.cond)
    if fixed:
        return [s.body] if value else [s.orelse]
    return [s.body, s.orelse]


def _tensors_read(stmts, impl_of):
    """The tensor operand of every load in ``stmts`` (in blocks that may
    run), or None if one is not a name."""
    names = []
    for s in stmts:
        exprs, blocks = _stmt_exprs(s)
        if isinstance(s, N.If):
            blocks = _live(s)
        for e in exprs:
            for x in _walk(e):
                if isinstance(x, N.Call) and impl_of(x) in LOADS:
                    t = x.args[x.record.runtime_params()[0]]
                    if not isinstance(t, N.Var):
                        return None
                    if t.name not in names:
                        names.append(t.name)
        for blk in blocks:
            inner = _tensors_read(blk, impl_of)
            if inner is None:
                return None
            names += [n for n in inner if n not in names]
    return names


def _scan_accum(plan: SitePlan, blocks, total, impl_of) -> None:
    for blk in blocks:
        for i, s in enumerate(blk):
            if isinstance(s, N.Assign) and len(s.targets) == 1:
                _accum_at(plan, blk, i, s.targets[0], total, impl_of)
            _scan_accum(plan, _stmt_exprs(s)[1], total, impl_of)


def _accum_at(plan: SitePlan, blk, i, name, total, impl_of) -> None:
    steps: list = []
    for last in range(i + 1, len(blk)):
        store = _accum_store(blk[last], name, impl_of)
        if store is not None:
            break
        if not _stretch(blk[last], name, impl_of, steps):
            return
    else:
        return
    between = blk[i + 1:last]
    if not steps or sum(_mentions(b, name) for b in blk[i:last + 1]) != total(name):
        return
    bound = walk.assigned(between)
    out = store.args["output_tensor"].name
    offs = store.args["offsets"].items
    reads = _tensors_read(between, impl_of)
    if reads is None or out in reads or out in bound or \
            any(isinstance(o, N.Var) and o.name in bound | {name} for o in offs) or \
            any(r in bound for r in reads):
        return
    handle = f"_acc{len(plan.accum_begin)}"
    plan.accum_begin[id(blk[i])] = (handle, store, reads)
    for c in steps:
        plan.accum_steps[id(c)] = handle
    plan.accum_store[id(store)] = handle


def scan_function(plan: SitePlan, fn, impl_of) -> None:
    """Mark the named loads of ``fn`` that may be views and the accumulations
    that may compute in place."""
    counts: dict = {}

    def total(name):
        if name not in counts:
            counts[name] = sum(_mentions(s, name) for s in fn.body)
        return counts[name]
    _scan_named(plan, [fn.body], total, impl_of)
    _scan_accum(plan, [fn.body], total, impl_of)
