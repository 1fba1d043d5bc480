"""IR nodes.  Every node keeps the source span it came from."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import Span
from .types import Type


# ---------------------------------------------------------------- expressions
@dataclass(eq=False)
class Expr:
    type: Type
    span: Span


@dataclass(eq=False)
class Const(Expr):
    value: Any = None


@dataclass(eq=False)
class Var(Expr):
    name: str = ""


@dataclass(eq=False)
class Call(Expr):
    """A call of a registered primitive.  ``args`` maps parameter names of the
    record's signature to IR expressions (defaults filled in as ``Const``)."""

    record: Any = None
    args: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)   # facts the rule derived for lowering


@dataclass(eq=False)
class FuncCall(Expr):
    """A call of another program function; ``device`` only on HOST dispatches."""

    func: Any = None           # FunctionIR
    args: list = field(default_factory=list)
    device: Expr | None = None
    devices: Any = None        # DeviceSet the dispatch covers


@dataclass(eq=False)
class BinOp(Expr):
    op: str = "+"
    left: Expr = None
    right: Expr = None


@dataclass(eq=False)
class UnaryOp(Expr):
    op: str = "-"
    operand: Expr = None


@dataclass(eq=False)
class Compare(Expr):
    op: str = "=="
    left: Expr = None
    right: Expr = None


@dataclass(eq=False)
class BoolOp(Expr):
    op: str = "and"
    values: list = field(default_factory=list)


@dataclass(eq=False)
class ListExpr(Expr):
    items: list = field(default_factory=list)


@dataclass(eq=False)
class TupleExpr(Expr):
    items: list = field(default_factory=list)


@dataclass(eq=False)
class SliceExpr(Expr):
    start: Expr | None = None
    stop: Expr | None = None


@dataclass(eq=False)
class Index(Expr):
    """``x[i]`` / ``x[a:b, c:d]`` on a tensor, window or tile: a view."""

    value: Expr = None
    items: list = field(default_factory=list)   # Expr (drops the dim) or SliceExpr


# ----------------------------------------------------------------- statements
@dataclass(eq=False)
class Stmt:
    span: Span


@dataclass(eq=False)
class Assign(Stmt):
    targets: list = field(default_factory=list)   # names; >1 means tuple unpacking
    value: Expr = None


@dataclass(eq=False)
class StoreIndex(Stmt):
    """``dst[a:b, c:d] = src`` / ``out[:] = expr``."""

    target: Expr = None        # an Index expression
    value: Expr = None


@dataclass(eq=False)
class ExprStmt(Stmt):
    expr: Expr = None


@dataclass(eq=False)
class For(Stmt):
    var: str = "_"
    start: Expr = None
    stop: Expr = None
    step: Expr = None
    body: list = field(default_factory=list)
    carried: list = field(default_factory=list)        # loop-carried names
    init: list = field(default_factory=list)           # their initial values
    yield_targets: list = field(default_factory=list)  # names bound by pl.yield_
    kind: str = "range"


@dataclass(eq=False)
class While(For):
    """``while cond:`` or ``for (a, b) in pl.while_(init_values=...)`` with
    ``pl.cond(cond)`` first.  A kind of ``For`` so every pass that looks at
    loops sees it as one (its trip count is never static: start, stop and
    step are None); ``cond`` is evaluated before each iteration."""

    cond: Expr = None


@dataclass(eq=False)
class Yield(Stmt):
    values: list = field(default_factory=list)
    targets: list = field(default_factory=list)
    carried: list = field(default_factory=list)


@dataclass(eq=False)
class If(Stmt):
    cond: Expr = None
    body: list = field(default_factory=list)
    orelse: list = field(default_factory=list)


@dataclass(eq=False)
class Return(Stmt):
    value: Expr | None = None


@dataclass(eq=False)
class TaskScope(Stmt):
    """One task of an orchestration function: a ``pl.at(CORE_GROUP)`` or
    ``pl.spmd`` body, or a kernel call, submitted to the rank's scheduler.

    The body lives in its own InCore function (``call.func``); ``call`` passes
    it the captured values, so every pass that follows calls follows tasks."""

    call: Any = None            # FuncCall of the outlined body
    name: str = ""              # name_hint (or the body function's name)
    target: str | None = None   # name bound to the TaskId (``as tid``)
    deps: list = field(default_factory=list)       # TaskId / TaskId-array expressions
    blocks: Expr | None = None  # pl.spmd block count
    accesses: list = field(default_factory=list)   # TaskAccess, per captured tensor
    manual: bool = False        # inside pl.manual_scope(): explicit edges only
    waiter: bool = False        # registers pld.system.defer_wait conditions
    kind: str = "at"            # "at", "spmd" or "call"
    no_dep: frozenset = frozenset()   # captured names left out of tracking (no_dep_args)
    dumps: tuple = ()           # indices into call.args named by dumps= (run artefacts)


@dataclass(eq=False)
class TaskAccess:
    """How a task touches one captured tensor: ``mode`` "r" or "w"; a region
    (offsets, extents; expressions of the orchestration) or None for all of it."""

    arg: int                    # index into the task call's arguments
    mode: str
    offsets: list | None = None
    extents: list | None = None


# ------------------------------------------------------------------ functions
@dataclass(eq=False)
class Param:
    name: str
    type: Type
    span: Span


@dataclass(eq=False)
class FunctionIR:
    name: str                   # unique within the program
    kind: str                   # host / orchestration / incore
    params: list
    body: list
    span: Span
    ret_type: Type | None = None
    py_name: str = ""
    returns_param: Any = None   # index (or tuple of indices) of the returned parameter(s)
    tasks: bool = False         # an orchestration function that submits tasks
    dump_tags: set = field(default_factory=set)     # tensor names given to pl.dump_tag


@dataclass(eq=False)
class BufferRecord:
    """One ``pld.alloc_window_buffer`` site.  What the program does with it
    (views, dispatches, devices, notifiers) is computed by ``analysis.facts``."""

    name: str
    id: int
    span: Span
    nbytes: Any = None          # static byte size when known


@dataclass(eq=False)
class ProgramIR:
    entry: FunctionIR
    functions: dict             # name -> FunctionIR
    buffers: list
    world: int
    spans: list = field(default_factory=list)   # span table, indexed by span id
    platform: Any = None                         # runtime.config.Platform checked against
