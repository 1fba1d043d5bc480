"""Lowering: typed IR -> readable Python/numpy source, one function each.

Every generated function takes the runtime object as ``_rt`` (the host
runtime for HOST orchestrators, the rank context inside a worker) and calls
op implementations as ``_rt.<impl>(...)``.  Each emitted line remembers the
user span it came from, so a traceback through generated code is reported at
the user's ``file:line``.  Sources are written to the cache directory so a
debugger can step through them.
"""
from __future__ import annotations

import enum
import hashlib
import os
from typing import NamedTuple

from ..dtypes import DataType
from ..errors import InternalError
from ..ir import nodes as N
from ..ir.effects import Effect
from ..ir.types import ArrayType, Dim, TensorType, is_static
from ..ops.check import const_value
from ..ir.kinds import HOST, INCORE, SUBWORKER
from .dumps import DumpTables
from .sites import BINARY, LOADS, SitePlan, calls_in, plain_store, scan_function
from ..runtime.rank.context import RankContext

# the implementations that build an asynchronous put's session
_SESSIONS = (RankContext.async_session, RankContext.tile_async_session)
_CMP_PY = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
# integer // and % of device code (kernels, chip orchestration): the runtime's
# truncating arith.divsi / arith.remsi, not Python's flooring operators
_DEVICE_INT_OPS = {"//": "divsi", "%": "remsi"}


def _is_int(e) -> bool:
    dt = getattr(e.type, "dtype", None)
    return dt is not None and dt.is_int


def py_name(fn_ir) -> str:
    return f"f_{fn_ir.name}"


class FunctionEmitter:
    def __init__(self, fn: N.FunctionIR, prog: N.ProgramIR, span_ids: dict,
                 sites: SitePlan | None = None, loops: list | None = None):
        self.fn = fn
        # InCore kernels call load / store / elementwise ops per call site
        # (lower/sites.py); other kinds call the plain ops
        self.sites = sites if fn.kind == INCORE and sites is not None else None
        if self.sites is not None:
            scan_function(self.sites, fn, self.impl_of)
        self.prog = prog
        self.lines: list[str] = []
        self.linemap: list = []          # parallel to lines: Span or None
        self.span_ids = span_ids
        self.tmp = 0
        # the program's loops (``Loop``; a loop's id is its index) and, parallel
        # to lines, the ids of the loops each line is in, outermost first
        self.loops = loops if loops is not None else []
        self.open: tuple = ()
        self.line_loops: list = []

    def emit(self, text: str, indent: int, span=None):
        self.lines.append("    " * indent + text)
        self.linemap.append(span)
        self.line_loops.append(self.open)

    def span_id(self, span) -> int:
        if span not in self.span_ids:
            self.span_ids[span] = len(self.prog.spans)
            self.prog.spans.append(span)
        return self.span_ids[span]

    # ------------------------------------------------------------ functions
    def function(self):
        params = ", ".join(["_rt"] + [p.name for p in self.fn.params])
        self.emit(f"def {py_name(self.fn)}({params}):", 0, self.fn.span)
        self.emit(f'"""{self.fn.kind} function {self.fn.py_name}, lowered from '
                  f'{self.fn.span}"""', 1, self.fn.span)
        if self.fn.tasks:
            # tasks go to the rank's scheduler; the function returns once every
            # task it submitted completed, and stops the rest if anything failed
            self.emit("_ts = _rt.task_scope()", 1, self.fn.span)
            self.emit("try:", 1, self.fn.span)
            self.block(self.fn.body, 2)
            if not (self.fn.body and isinstance(self.fn.body[-1], N.Return)):
                self.emit("_ts.close()", 2, self.fn.span)
                self.emit("return None", 2, self.fn.span)
            self.emit("except BaseException as _e:", 1, self.fn.span)
            self.emit("raise _ts.abandon(_e)", 2, self.fn.span)
            return
        if self.builds_session():
            # the events of asynchronous puts must be waited before the
            # function ends: the frame's close says which were not
            # (runtime/rank/async_puts.py); a function without a session
            # gets no frame
            self.emit("_af = _rt.async_frame()", 1, self.fn.span)
            self.emit("try:", 1, self.fn.span)
            self.block(self.fn.body, 2)
            self.emit("except BaseException:", 1, self.fn.span)
            self.emit("_af.abandon()", 2, self.fn.span)
            self.emit("raise", 2, self.fn.span)
            self.emit("finally:", 1, self.fn.span)
            self.emit("_af.close()", 2, self.fn.span)
            return
        self.block(self.fn.body, 1)
        if not (self.fn.body and isinstance(self.fn.body[-1], N.Return)):
            self.emit("return None", 1, self.fn.span)

    def builds_session(self) -> bool:
        return any(self.impl_of(c) in _SESSIONS for c in calls_in(self.fn.body))

    def block(self, stmts, ind):
        if not stmts:
            self.emit("pass", ind)
        for s in stmts:
            getattr(self, "s_" + type(s).__name__)(s, ind)

    # ------------------------------------------------------------ statements
    def s_Assign(self, s, ind):
        lhs = ", ".join(s.targets) if len(s.targets) > 1 else s.targets[0]
        self.emit(f"{lhs} = {self.e(s.value)}", ind, s.span)
        accum = self.sites.accum_begin.get(id(s)) if self.sites is not None else None
        if accum is not None:
            # the accumulation's steps compute into the region its store writes
            # (lower/sites.py); the handle is None where the runtime declines
            handle, store, reads = accum
            self.emit(f"{handle} = _rt.accum_begin({self.sites.next_site()}, "
                      f"{self.e(store.args['offsets'])}, {self.e(store.args['output_tensor'])}, "
                      f"({''.join(r + ', ' for r in reads)}))", ind, s.span)

    def s_StoreIndex(self, s, ind):
        tgt = s.target
        if isinstance(tgt.value.type, ArrayType):
            # pl.Array: a functional update that rebinds the array's name
            name = self.e(tgt.value)
            self.emit(f"{name} = _rt.array_set({name}, {self.e(tgt.items[0])}, "
                      f"{self.e(s.value)})", ind, s.span)
            return
        self.emit(f"_rt.assign({self.e(tgt.value)}, {self.items(tgt.items)}, {self.e(s.value)})",
                  ind, s.span)

    def s_ExprStmt(self, s, ind):
        self.emit(self.e(s.expr), ind, s.span)

    def s_For(self, s, ind):
        for name, init in zip(s.carried, s.init):
            self.emit(f"{name} = {self.e(init)}", ind, s.span)
        for tgt, name in zip(s.yield_targets, s.carried):
            self.emit(f"{tgt} = {name}", ind, s.span)
        rng = f"range({self.e(s.start)}, {self.e(s.stop)}, {self.e(s.step)})"
        if s.kind == "split_aiv":        # each AIV lane runs the body, the lane index set
            rng = f"_rt.aiv_lanes({self.e(s.stop)})"
        self.emit(f"for {s.var} in {rng}:", ind, s.span)
        outer = self.open
        self.open = outer + (len(self.loops),)
        self.loops.append(Loop(s.var, s.span, self.fn.py_name))
        self.block(s.body, ind + 1)
        self.open = outer

    def s_While(self, s, ind):
        for name, init in zip(s.carried, s.init):
            self.emit(f"{name} = {self.e(init)}", ind, s.span)
        for tgt, name in zip(s.yield_targets, s.carried):
            self.emit(f"{tgt} = {name}", ind, s.span)
        if self.fn.kind == HOST:
            self.emit(f"while {self.e(s.cond)}:", ind, s.span)
            self.block(s.body, ind + 1)
            return
        # a loop that never ends must still stop when the call is aborted (another
        # rank failed): every 1024 iterations the rank checks the abort flag
        n = f"_w{self.tmp}"
        self.tmp += 1
        self.emit(f"{n} = 0", ind, s.span)
        self.emit(f"while {self.e(s.cond)}:", ind, s.span)
        self.emit(f"{n} += 1", ind + 1, s.span)
        self.emit(f"if not {n} & 1023:", ind + 1, s.span)
        self.emit("_rt.still_running()", ind + 2, s.span)
        self.block(s.body, ind + 1)

    def s_Yield(self, s, ind):
        t = f"_y{self.tmp}"
        self.tmp += 1
        self.emit(f"{t} = ({', '.join(self.e(v) for v in s.values)},)", ind, s.span)
        self.emit(f"{', '.join(s.carried)}, = {t}", ind, s.span)
        self.emit(f"{', '.join(s.targets)}, = {t}", ind, s.span)

    def s_If(self, s, ind):
        self.emit(f"if {self.e(s.cond)}:", ind, s.span)
        self.block(s.body, ind + 1)
        if s.orelse:
            self.emit("else:", ind, s.span)
            self.block(s.orelse, ind + 1)

    def s_Return(self, s, ind):
        value = self.e(s.value) if s.value is not None else 'None'
        if self.fn.tasks:
            self.emit(f"_r = {value}", ind, s.span)
            self.emit("_ts.close()", ind, s.span)
            value = "_r"
        self.emit(f"return {value}", ind, s.span)

    def s_TaskScope(self, s, ind):
        call = s.call
        args = [self.e(a) for a in call.args]
        if any(not a.isidentifier() for a in args):
            # arguments are evaluated once: the call and the tracked accesses share them
            tup = f"_ta{self.tmp}"
            self.tmp += 1
            self.emit(f"{tup} = ({''.join(a + ', ' for a in args)})", ind, s.span)
            args = [f"{tup}[{i}]" for i in range(len(args))]
        acc = []
        for a in s.accesses:
            offs = literal(None) if a.offsets is None else \
                "(" + "".join(self.e(o) + ", " for o in a.offsets) + ")"
            ext = literal(None) if a.extents is None else \
                "(" + "".join(self.e(o) + ", " for o in a.extents) + ")"
            acc.append(f"({args[a.arg]}, {a.mode!r}, {offs}, {ext})")
        deps = "(" + "".join(self.e(d) + ", " for d in s.deps) + ")"
        blocks = self.e(s.blocks) if s.blocks is not None else "1"
        text = (f"_ts.submit({py_name(call.func)}, ({''.join(a + ', ' for a in args)}), "
                f"{s.name!r}, {self.span_id(s.span)}, {deps}, "
                f"({''.join(x + ', ' for x in acc)}), {blocks}, {s.waiter}, {s.manual})")
        self.emit(f"{s.target} = {text}" if s.target else text, ind, s.span)

    # ------------------------------------------------------------ expressions
    def e(self, x) -> str:
        return getattr(self, "e_" + type(x).__name__)(x)

    def e_Const(self, x):
        return literal(x.value)

    def e_Var(self, x):
        return x.name

    def e_ListExpr(self, x):
        return "(" + "".join(self.e(i) + ", " for i in x.items) + ")"

    e_TupleExpr = e_ListExpr

    def e_BinOp(self, x):
        if x.op in _DEVICE_INT_OPS and self.fn.kind != HOST and _is_int(x.left) and \
                _is_int(x.right):
            # device code: C semantics (truncation toward zero), see runtime/rank/tile/scalar_ops.py
            return f"_rt.{_DEVICE_INT_OPS[x.op]}({self.e(x.left)}, {self.e(x.right)})"
        return f"({self.e(x.left)} {x.op} {self.e(x.right)})"

    def e_UnaryOp(self, x):
        return f"({x.op}{self.e(x.operand)})"

    def e_Compare(self, x):
        return f"({self.e(x.left)} {_CMP_PY[x.op]} {self.e(x.right)})"

    def e_BoolOp(self, x):
        return "(" + f" {x.op} ".join(self.e(v) for v in x.values) + ")"

    def items(self, items) -> str:
        parts = []
        for it in items:
            if isinstance(it, N.SliceExpr):
                lo = self.e(it.start) if it.start is not None else "None"
                hi = self.e(it.stop) if it.stop is not None else "None"
                parts.append(f"slice({lo}, {hi})")
            else:
                parts.append(self.e(it))
        return "(" + "".join(p + ", " for p in parts) + ")"

    def e_Index(self, x):
        return f"_rt.index({self.e(x.value)}, {self.items(x.items)})"

    def impl_of(self, x):
        return x.record.impl_for(self.fn.kind)

    def e_Call(self, x):
        rec = x.record
        impl = rec.impl_for(self.fn.kind)
        if self.sites is not None:
            at = self.site_call(x, impl)
            if at is not None:
                return at
        if impl is None:
            raise InternalError(f"{rec.name} has no implementation for {self.fn.kind} functions")
        # the argument list is rec.impl_param_names(); a test checks every
        # implementation's signature against it
        args = [self.e(x.args[p]) for p in rec.runtime_params()]
        if rec.declares_buffer:
            args.insert(0, str(x.extra["buffer"].id))
        if Effect.WAIT in rec.effects:       # where the rank blocks, for the deadlock report
            args.append(str(self.span_id(x.span)))
        # the runtime object _rt is a RankContext or a HostRuntime whose method
        # of this name is the record's implementation (checked by a test); a
        # direct method call keeps the hot path free of any indirection
        return f"_rt.{impl.__name__}({', '.join(args)})"

    def site_call(self, x, impl):
        """The call-site form of a load, store or elementwise op, or None."""
        sites = self.sites
        sites.scan_once(x, self.impl_of)         # the outermost call of an expression
        if impl in LOADS:
            args = ", ".join(self.e(x.args[p]) for p in x.record.runtime_params())
            view = id(x) in sites.views
            return f"_rt.{impl.__name__}_at({sites.next_site()}, {view}, {args})"
        if impl in BINARY and id(x) in sites.accum_steps:
            return (f"_rt.accum_at({sites.next_site()}, {BINARY[impl]}, "
                    f"{self.e(x.args['lhs'])}, {self.e(x.args['rhs'])}, "
                    f"{sites.accum_steps[id(x)]})")
        if impl in BINARY:
            return (f"_rt.binary_at({sites.next_site()}, {BINARY[impl]}, "
                    f"{self.e(x.args['lhs'])}, {self.e(x.args['rhs'])})")
        if impl is RankContext.store:
            tile = x.args["tile"]
            if isinstance(tile, N.Call) and self.impl_of(tile) in BINARY and \
                    id(x) in sites.fusable:
                return (f"_rt.store_binary_at({sites.next_site()}, {BINARY[self.impl_of(tile)]}, "
                        f"{self.e(tile.args['lhs'])}, {self.e(tile.args['rhs'])}, "
                        f"{self.e(x.args['offsets'])}, {self.e(x.args['output_tensor'])})")
            if isinstance(tile, N.Call) and self.impl_of(tile) is RankContext.load and \
                    id(tile) in sites.views and plain_store(x):
                # a copy from region to region: one call instead of two
                load_site = sites.next_site()
                return (f"_rt.copy_at({load_site}, {sites.next_site()}, "
                        f"{self.e(tile.args['tensor'])}, {self.e(tile.args['offsets'])}, "
                        f"{self.e(tile.args['shapes'])}, {self.e(x.args['offsets'])}, "
                        f"{self.e(x.args['output_tensor'])})")
            if id(x) in sites.accum_store:
                return (f"_rt.accum_store_at({sites.next_site()}, {self.e(tile)}, "
                        f"{self.e(x.args['offsets'])}, {self.e(x.args['output_tensor'])}, "
                        f"{sites.accum_store[id(x)]})")
            args = ", ".join(self.e(x.args[p]) for p in x.record.runtime_params())
            return f"_rt.store_at({sites.next_site()}, {args})"
        return None

    def e_FuncCall(self, x):
        callee = x.func
        args = []
        for p, a in zip(callee.params, x.args):
            s = self.e(a)
            pt, at = p.type, a.type
            # a dispatch's arguments are materialised in the parameter's shape by the worker
            if self.fn.kind != HOST and isinstance(pt, TensorType) and isinstance(at, TensorType) \
                    and pt.shape and at.shape \
                    and tuple(pt.shape) != tuple(at.shape) and all(map(is_static, pt.shape)):
                s = f"_rt.as_shape({s}, {literal(tuple(pt.shape))})"
            args.append(s)
        if callee.kind == SUBWORKER:        # Python in the controller, after its producers
            return (f"_rt.sub_worker({callee.name!r}, ({''.join(a + ', ' for a in args)}), "
                    f"{self.span_id(x.span)})")
        if self.fn.kind == HOST:
            dev = self.e(x.device) if x.device is not None else "None"
            ret = literal(callee.returns_param)
            return (f"_rt.dispatch({callee.name!r}, {dev}, ({''.join(a + ', ' for a in args)}), "
                    f"{self.span_id(x.span)}, {ret})")
        return f"{py_name(callee)}({', '.join(['_rt'] + args)})"


def literal(v) -> str:
    if isinstance(v, DataType):
        return f"_dt.{v.name}"
    if isinstance(v, enum.Enum):
        return str(int(v.value))
    if isinstance(v, Dim):
        raise InternalError(f"unbound dynamic dimension {v!r} reached code generation")
    if isinstance(v, (list, tuple)):
        return "(" + "".join(literal(i) + ", " for i in v) + ")"
    if isinstance(v, float) and v != v:
        return "float('nan')"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "float('inf')" if v > 0 else "float('-inf')"
    if v is None or isinstance(v, (bool, int, float, str)):
        return repr(v)
    raise InternalError(f"cannot emit a literal for {v!r}")


_KEEP_SOURCES = 500


def _prune(folder: str) -> None:
    """Keep the newest lowered sources only: the cache is for stepping through
    recent programs, not an archive."""
    names = [os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".py")]
    if len(names) <= _KEEP_SOURCES:
        return
    names.sort(key=lambda n: os.stat(n).st_mtime)
    for n in names[:len(names) - _KEEP_SOURCES]:
        try:
            os.unlink(n)
        except OSError:
            pass


class Loop(NamedTuple):
    """A ``for`` loop of the program, as a report names an iteration of it:
    ``var`` its index variable (the name the lowered code binds too), ``span``
    the loop statement, ``function`` the user's function it is in."""

    var: str
    span: object
    function: str


class Lowered:
    """The lowered program: source text, compiled namespace, and line map.

    ``loops`` lists the program's ``for`` loops (``Loop``) and ``line_loops``
    maps a lowered line to the ids (indices into ``loops``) of the loops it is
    in, outermost first.  Nothing in the lowered code reads them: a report
    that names iterations finds the index variables in the lowered frames of
    the rank's stack (``runtime/rank/iterations.py``), so a run that reports
    nothing pays nothing for them."""

    def __init__(self, source: str, filename: str, linemap: dict, namespace: dict,
                 dumps: DumpTables | None = None, loops: tuple = (),
                 line_loops: dict | None = None):
        self.source = source
        self.filename = filename
        self.linemap = linemap
        self.namespace = namespace
        self.dumps = dumps              # what enable_dump_args=1 writes (lower/dumps.py)
        self.loops = tuple(loops)
        self.line_loops = dict(line_loops or {})


def lower_program(prog: N.ProgramIR, cache_dir: str) -> Lowered:
    span_ids = {s: i for i, s in enumerate(prog.spans)}
    lines, linemap = ["# generated by tilecomm from the user's program; edits are not read back",
                      "from tilecomm import dtypes as _dt", ""], {}
    sites = SitePlan()
    loops: list = []
    line_loops: dict = {}
    for fn in prog.functions.values():
        em = FunctionEmitter(fn, prog, span_ids, sites, loops)
        em.function()
        base = len(lines)
        for i, sp in enumerate(em.linemap):
            if sp is not None:
                linemap[base + i + 1] = sp
            if em.line_loops[i]:
                line_loops[base + i + 1] = em.line_loops[i]
        lines.extend(em.lines)
        lines.append("")
    source = "\n".join(lines) + "\n"
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    filename = os.path.join(cache_dir, "lowered", f"{prog.entry.name}_{digest}.py")
    try:
        os.makedirs(os.path.dirname(filename), exist_ok=True)
        if not os.path.exists(filename):
            tmp = f"{filename}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(source)
            os.replace(tmp, filename)
            _prune(os.path.dirname(filename))
    except OSError:
        filename = f"<tilecomm:{prog.entry.name}_{digest}>"   # read-only cache: keep in memory
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    # after every function is emitted: each task's span has its id
    return Lowered(source, filename, linemap, namespace, DumpTables(prog, span_ids, py_name),
                   loops, line_loops)


__all__ = ["Loop", "lower_program", "Lowered", "literal", "const_value"]
