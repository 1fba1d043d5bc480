"""Which calls of an InCore kernel take the call-site data path
(``runtime/rank/tile/site_ops.py``), and whether a load there may be a view.

A loaded tile is a value snapshot.  A load may return the source region
itself only where that cannot be told apart: the load is an operand of an
elementwise op (or the tile of a ``pl.store``) in the same expression, and
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
_PURE = set(LOADS) | set(BINARY) | {RankContext.div, RankContext.const, RankContext.smin,
                                    RankContext.smax, RankContext.rank, RankContext.nranks,
                                    RankContext.get_comm_ctx}


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
