"""The protocol a program runs, rank by rank: its signal and window events.

The protocol lint (``verify/lint.py``) asks questions such as "which ranks
add into this cell, and how often" or "does this rank wait before it reads
what its peers stored".  The IR answers them only once its symbolic values
are bound, so this pass executes the program abstractly, once: the HOST
orchestrator with the world size the program is compiled for, every dispatch
on the rank it names, every kernel with its scalar arguments.  Loops with a
static trip count are unrolled, ``pl.split_aiv`` regions run once per lane,
``pl.spmd`` bodies once per block.  A value that depends on data (a
``pl.read``, a host scalar argument, a dynamic loop bound) is ``UNKNOWN``, and
everything computed from it too.

Each event records what it touched (buffer, byte offset of the cell, the
region, the peer) where known and ``None`` where not, and whether it happens
a known number of times (``certain``): an event in a loop with a dynamic trip
count or a branch whose condition is unknown may run zero or many times.  A
buffer one of whose events is uncertain or has an unknown peer or cell is
*inexact*; rules that reason about the absence of something (no notifier
reaches a threshold, no wait precedes a read) stay silent on it.
"""
from __future__ import annotations

import itertools
from typing import NamedTuple

from ..ir import nodes as N
from ..ir import walk
from ..ir.effects import Effect
from ..ir.enums import AtomicType, NotifyOp, WaitCmp
from ..ir.kinds import HOST, SUBWORKER
from ..ir.types import TensorType

# a loop with more iterations than this is executed once, as a dynamic one
MAX_UNROLL = 512
# statements executed at most per program: beyond that the facts are partial
# (and every rule that needs whole facts is silent)
MAX_STEPS = 200_000


class _Unknown:
    def __repr__(self):
        return "UNKNOWN"


UNKNOWN = _Unknown()


class Window(NamedTuple):
    """A window view as a kernel sees it: element ``offsets`` of its view
    start at byte ``base + itemsize * linear(offsets)`` of ``buf``."""

    buf: object                # ir.nodes.BufferRecord
    base: int | None           # byte offset of the view's first element
    shape: tuple               # static dims (None where dynamic)
    itemsize: int


class CommCtx(NamedTuple):
    devices: tuple             # the comm domain's ranks, in rank order


class Region(NamedTuple):
    """Elements ``offsets .. offsets + extents`` of a view of a buffer."""

    window: Window
    offsets: tuple
    extents: tuple

    def cell(self) -> int | None:
        """The byte offset of the first element (the signal cell of a notify / wait)."""
        return _byte(self.window, self.offsets)

    def byte_range(self):
        """[lo, hi) in bytes when the region is one contiguous run, else None."""
        w = self.window
        if w.base is None or None in w.shape:
            return None
        # contiguous when every dim after the first partial one is whole
        partial = False
        for o, e, d in zip(self.offsets, self.extents, w.shape):
            if partial and (o != 0 or e != d):
                return None
            if e != 1:
                partial = partial or e != d
        lo = _byte(w, self.offsets)
        last = tuple(o + e - 1 for o, e in zip(self.offsets, self.extents))
        return lo, _byte(w, last) + w.itemsize


def _byte(w: Window, offs) -> int | None:
    if w.base is None or None in w.shape or any(o is None for o in offs):
        return None
    lin = 0
    for o, d in zip(offs, w.shape):
        lin = lin * d + o
    return w.base + lin * w.itemsize


def overlap(a: Region, b: Region) -> bool | None:
    """Whether two regions of one buffer share a byte (None: cannot tell)."""
    if a.window.buf is not b.window.buf:
        return False
    same_view = a.window[1:] == b.window[1:] and a.window.base is not None
    if same_view and len(a.offsets) == len(b.offsets):
        return all(ao < bo + be and bo < ao + ae for ao, ae, bo, be in
                   zip(a.offsets, a.extents, b.offsets, b.extents))
    ra, rb = a.byte_range(), b.byte_range()
    if ra is None or rb is None:
        return None
    return ra[0] < rb[1] and rb[0] < ra[1]


# event kinds
NOTIFY, WAIT, REMOTE_WRITE, REMOTE_READ, READ, WRITE, COLLECTIVE = (
    "notify", "wait", "remote_write", "remote_read", "read", "write", "collective")


class Event(NamedTuple):
    kind: str
    rank: int
    seq: int                   # program order on its rank (dispatches are served in order)
    activation: int            # one kernel (or task body) execution
    span: object
    site: int                  # id of the IR call: one source site, many events
    region: Region | None      # the cell of a notify / wait, the data of the others
    buf: object                # the buffer (None: unknown window)
    peer: int | None = None    # the rank whose copy a notify / remote access reaches
    op: object = None          # NotifyOp, WaitCmp, AtomicType or the collective's name
    value: int | None = None   # notify value / wait expected
    certain: bool = True       # runs exactly once where it stands
    lane: object = None        # (region instance, lane) inside a pl.split_aiv body
    # an asynchronous put's write: the span of the event's wait that lands it
    # (the event comes where that wait stands, not where the put was issued)
    landed: object = None


class _Issued(NamedTuple):
    """An asynchronous put's event, as the abstract execution carries it: the
    issuing call and its arguments, whose effects the event's wait emits."""

    call: object
    args: dict


class ProtocolFacts(NamedTuple):
    events: list
    world: int
    inexact: frozenset         # buffers whose events are not all known exactly
    partial: bool              # the execution was cut short or lost track of a window
    # (span, peer, ranks of the window's domain) of each peer index known to be
    # outside its comm domain: the call would fail on it at run time
    stray_peers: tuple = ()


class _Return(Exception):
    pass


class _Frame(NamedTuple):
    params: list               # values of the function's parameters
    env: dict


class ProtocolRun:
    """The abstract execution of one program."""

    def __init__(self, prog: N.ProgramIR, facts):
        self.prog = prog
        self.facts = facts
        self.events: list = []
        self.inexact: set = set()
        self.partial = False
        self.steps = 0
        self.seq = itertools.count()
        self.acts = itertools.count()
        self.rank = None
        self.activation = 0
        self.certain = True
        self.lane = None
        self.stray_peers: dict = {}

    # ------------------------------------------------------------ driver
    def run(self) -> ProtocolFacts:
        entry = self.prog.entry
        try:
            self.call(entry, [UNKNOWN] * len(entry.params))
        except _Budget:
            self.partial = True
        return ProtocolFacts(self.events, self.prog.world, frozenset(self.inexact), self.partial,
                             tuple(self.stray_peers.values()))

    def call(self, fn, args):
        frame = _Frame(list(args), {p.name: a for p, a in zip(fn.params, args)})
        try:
            self.block(fn.body, frame)
        except _Return:
            pass

    # ------------------------------------------------------------ statements
    def block(self, body, frame):
        for s in body:
            self.stmt(s, frame)

    def stmt(self, s, frame):
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _Budget()
        env = frame.env
        if isinstance(s, N.Assign):
            v = self.expr(s.value, frame)
            if len(s.targets) == 1:
                env[s.targets[0]] = v
            else:
                items = v if isinstance(v, tuple) and len(v) == len(s.targets) else None
                for i, t in enumerate(s.targets):
                    env[t] = items[i] if items else UNKNOWN
        elif isinstance(s, N.ExprStmt):
            self.expr(s.expr, frame)
        elif isinstance(s, N.StoreIndex):
            self.expr(s.value, frame)
            w = self.window(s.target, frame)
            if isinstance(w, Window):
                self.emit(WRITE, s.target, w, _whole(w), site=id(s), span=s.span)
        elif isinstance(s, N.Return):
            if s.value is not None:
                self.expr(s.value, frame)
            raise _Return()
        elif isinstance(s, N.If):
            self.branch(s, frame)
        elif isinstance(s, N.While):
            self.dynamic_loop(s, frame)
        elif isinstance(s, N.For):
            self.loop(s, frame)
        elif isinstance(s, N.Yield):
            for v in s.values:
                self.expr(v, frame)
            for t in list(s.targets) + list(s.carried):
                env[t] = UNKNOWN
        elif isinstance(s, N.TaskScope):
            self.task(s, frame)

    def branch(self, s, frame):
        c = self.expr(s.cond, frame)
        if c is not UNKNOWN:
            self.block(s.body if c else s.orelse, frame)
            return
        before = dict(frame.env)
        was, self.certain = self.certain, False
        try:
            self.block(s.body, frame)
            after_body = dict(frame.env)
            frame.env.clear()
            frame.env.update(before)
            self.block(s.orelse, frame)
        finally:
            self.certain = was
        for k in set(after_body) | set(frame.env):
            if after_body.get(k, UNKNOWN) is not frame.env.get(k, UNKNOWN) and \
                    after_body.get(k) != frame.env.get(k):
                frame.env[k] = UNKNOWN

    def loop(self, s, frame):
        start, stop, step = (self.expr(e, frame) for e in (s.start, s.stop, s.step))
        for name, v in zip(s.carried, s.init):
            frame.env[name] = self.expr(v, frame)
        trip = None
        if all(isinstance(v, int) for v in (start, stop, step)) and step != 0:
            trip = range(start, stop, step)
        if trip is None or len(trip) > MAX_UNROLL:
            self.dynamic_loop(s, frame)
            return
        region = (next(self.acts), s) if s.kind == "split_aiv" else None
        for i in trip:
            frame.env[s.var] = i
            if region is not None:
                was, self.lane = self.lane, (region, i)
            try:
                self.block(s.body, frame)
            finally:
                if region is not None:
                    self.lane = was
        self._forget_carried(s, frame)

    def dynamic_loop(self, s, frame):
        """Run the body once with everything it rebinds unknown: its events may
        happen any number of times."""
        for name in walk.assigned(s.body) | {s.var} | set(s.carried):
            frame.env[name] = UNKNOWN
        if isinstance(s, N.While):
            self.expr(s.cond, frame)
        was, self.certain = self.certain, False
        try:
            self.block(s.body, frame)
        finally:
            self.certain = was
        for name in walk.assigned(s.body):
            frame.env[name] = UNKNOWN
        self._forget_carried(s, frame)

    @staticmethod
    def _forget_carried(s, frame):
        for name in list(s.carried) + list(s.yield_targets):
            frame.env[name] = UNKNOWN

    def task(self, s, frame):
        call = s.call
        args = [self.expr(a, frame) for a in call.args]
        blocks = self.expr(s.blocks, frame) if s.blocks is not None else 1
        if not isinstance(blocks, int) or blocks > MAX_UNROLL:
            was, self.certain = self.certain, False
            try:
                self.enter(call.func, args, block=UNKNOWN)
            finally:
                self.certain = was
            return
        for b in range(blocks):
            self.enter(call.func, args, block=b)

    def enter(self, fn, args, block=0):
        """Execute a kernel or task body: a new activation."""
        was = self.activation, getattr(self, "block_idx", 0)
        self.activation, self.block_idx = next(self.acts), block
        try:
            self.call(fn, args)
        finally:
            self.activation, self.block_idx = was

    # ------------------------------------------------------------ expressions
    def expr(self, e, frame):
        if isinstance(e, N.Const):
            return e.value if isinstance(e.value, (int, bool)) or e.value is None else e.value
        if isinstance(e, N.Var):
            t = e.type
            if isinstance(t, TensorType) and t.dist:
                return self.window(e, frame)
            return frame.env.get(e.name, UNKNOWN)
        if isinstance(e, N.BinOp):
            return _binop(e.op, self.expr(e.left, frame), self.expr(e.right, frame))
        if isinstance(e, N.UnaryOp):
            v = self.expr(e.operand, frame)
            if not isinstance(v, int):
                return UNKNOWN
            return {"-": -v, "+": v, "not": not v, "~": ~v}.get(e.op, UNKNOWN)
        if isinstance(e, N.Compare):
            return _compare(e.op, self.expr(e.left, frame), self.expr(e.right, frame))
        if isinstance(e, N.BoolOp):
            vals = [self.expr(v, frame) for v in e.values]
            if any(v is UNKNOWN for v in vals):
                return UNKNOWN
            return all(vals) if e.op == "and" else any(vals)
        if isinstance(e, (N.ListExpr, N.TupleExpr)):
            return tuple(self.expr(i, frame) for i in e.items)
        if isinstance(e, N.Index):
            if isinstance(e.type, TensorType) and e.type.dist:
                return self.window(e, frame)
            self.expr(e.value, frame)
            return UNKNOWN
        if isinstance(e, N.FuncCall):
            return self.func_call(e, frame)
        if isinstance(e, N.Call):
            from_call = self.op_call(e, frame)
            return from_call
        return UNKNOWN

    def func_call(self, e, frame):
        args = [self.expr(a, frame) for a in e.args]
        if e.func.kind == SUBWORKER:
            return UNKNOWN               # plain Python in the controller: no pld ops
        if e.func.kind == HOST or self.rank is not None:
            self.enter(e.func, args)
            return self._result(e, args)
        # a HOST dispatch: the kernel runs on the rank device= names
        dev = self.expr(e.device, frame) if e.device is not None else UNKNOWN
        ranks = [dev] if isinstance(dev, int) else sorted(e.devices or ())
        if not isinstance(dev, int):
            if len(ranks) != 1:
                self.partial = True       # which rank runs it is not known here
                return UNKNOWN
        self.rank = ranks[0]
        try:
            self.enter(e.func, args)
        finally:
            self.rank = None
        return self._result(e, args)

    @staticmethod
    def _result(e, args):
        rp = e.func.returns_param
        if isinstance(rp, int) and rp < len(args):
            return args[rp]
        return UNKNOWN

    def window(self, e, frame):
        """The Window a dist tensor expression denotes, or UNKNOWN."""
        if isinstance(e, N.Index):
            w = self.window(e.value, frame)
            if not isinstance(w, Window):
                return UNKNOWN
            return _sub_window(w, [self._slice(i, frame) for i in e.items])
        if isinstance(e, N.Var) and isinstance(frame.env.get(e.name), Window):
            return frame.env[e.name]
        origin = getattr(e.type, "origin", None)
        if isinstance(origin, tuple) and origin and origin[0] == "param":
            v = frame.params[origin[1]] if origin[1] < len(frame.params) else UNKNOWN
            return v if isinstance(v, Window) else UNKNOWN
        if isinstance(e, N.Call):
            return self.op_call(e, frame)
        return UNKNOWN

    def _slice(self, item, frame):
        if isinstance(item, N.SliceExpr):
            start = self.expr(item.start, frame) if item.start is not None else 0
            stop = self.expr(item.stop, frame) if item.stop is not None else None
            return ("slice", start, stop)
        return ("index", self.expr(item, frame))

    def op_call(self, e, frame):
        rec = e.record
        if rec.value is not None:
            return rec.value(self.prog.world)
        args = {k: self.expr(a, frame) for k, a in e.args.items()}
        name = rec.name
        if name == "pld.tensor.window":
            buf = getattr(e.type, "origin", None)
            if not isinstance(buf, N.BufferRecord):
                return UNKNOWN
            shape = tuple(d if isinstance(d, int) else None for d in e.type.shape)
            return Window(buf, 0, shape, e.type.dtype.get_byte())
        if name == "pld.system.get_comm_ctx":
            w = args.get("dist_tensor")
            if not isinstance(w, Window):
                return UNKNOWN
            devs = self.facts.buffer(w.buf).devices if w.buf in self.facts.buffers else ()
            return CommCtx(tuple(sorted(devs)) or tuple(range(self.prog.world)))
        if name in ("pld.system.rank", "pld.system.nranks"):
            ctx = args.get("ctx")
            if not isinstance(ctx, CommCtx) or self.rank not in ctx.devices:
                return UNKNOWN
            return ctx.devices.index(self.rank) if name.endswith("rank") else len(ctx.devices)
        if name == "pl.tile.get_subblock_idx":
            return self.lane[1] if self.lane is not None else 0
        if name == "pl.get_block_idx":
            return getattr(self, "block_idx", 0)
        if name in ("pl.min", "pl.max") and all(isinstance(v, int) for v in args.values()):
            return (min if name == "pl.min" else max)(args.values())
        if rec.asynchronous == "issue" and self.rank is not None:
            # the transfer may land any time until its event is waited: its
            # write counts where the wait stands (a notify between the two
            # does not follow it)
            return _Issued(e, args)
        if rec.asynchronous == "complete":
            issued = args.get("event")
            if isinstance(issued, _Issued) and self.rank is not None:
                self.effects(issued.call, issued.args, landed=e.span)
            return UNKNOWN
        if self.rank is not None or rec.collective:
            self.effects(e, args)
        if isinstance(e.type, TensorType) and e.type.dist:
            # an op that returns a window returns the one it writes
            for k in rec.writes or tuple(args):
                if isinstance(args.get(k), Window):
                    return args[k]
        return UNKNOWN

    # ------------------------------------------------------------ events
    def effects(self, e, args, landed=None):
        rec = e.record
        if rec.collective:
            ranks = [self.rank] if self.rank is not None else self._domain(args)
            for name, w in args.items():
                if isinstance(w, Window):
                    for r in ranks:
                        self.emit(COLLECTIVE, e, w, _whole(w), op=rec.name, rank=r)
            return
        if _int(args.get("peer")) is not None and self.certain:
            self._check_peer(e, args.get(rec.notifies) if rec.notifies else None, args)
        if rec.notifies is not None:
            w = args.get(rec.notifies)
            self.emit(NOTIFY, e, w, self._cell(w, args.get("offsets")),
                      peer=self._peer(w, args.get("peer")), op=_const(args.get("op")),
                      value=_int(args.get("value")))
            return
        if Effect.WAIT in rec.effects and "signal" in args:
            w = args.get("signal")
            cmp = WaitCmp.Ge if rec.defers else _const(args.get("cmp"))
            self.emit(WAIT, e, w, self._cell(w, args.get("offsets")), op=cmp,
                      value=_int(args.get("expected")))
            return
        for pname, w in args.items():
            if not isinstance(w, Window) and not _is_dist(e.args[pname]):
                continue
            if pname in rec.untracked:
                if Effect.REMOTE_WRITE in rec.effects:
                    self.emit(REMOTE_WRITE, e, w, self._data_region(e, args, pname),
                              peer=self._peer(w, args.get("peer")),
                              op=_const(args.get("atomic")) or AtomicType.None_,
                              landed=landed)
                elif Effect.REMOTE_READ in rec.effects:
                    self.emit(REMOTE_READ, e, w, self._data_region(e, args, pname),
                              peer=self._peer(w, args.get("peer")))
                continue
            writes = pname in rec.writes or (not rec.writes and Effect.WRITE in rec.effects)
            self.emit(WRITE if writes else READ, e, w, self._data_region(e, args, pname))

    def emit(self, kind, e, w, region, site=None, span=None, rank=None, **kw):
        buf = w.buf if isinstance(w, Window) else None
        if buf is None:
            if kind in (NOTIFY, WAIT, REMOTE_WRITE, REMOTE_READ):
                self.partial = True      # a signal or remote access on a window lost track of
            return
        r = self.rank if rank is None else rank
        if r is None:
            return
        if not self.certain or region is None or \
                (kind in (NOTIFY, REMOTE_WRITE, REMOTE_READ) and kw.get("peer") is None) or \
                (kind in (NOTIFY, WAIT) and (region.cell() is None or kw.get("value") is None)):
            self.inexact.add(buf)
        self.events.append(Event(kind, r, next(self.seq), self.activation, span or e.span,
                                 site or id(e), region, buf, certain=self.certain,
                                 lane=self.lane, **kw))

    def _domain(self, args):
        devs = set()
        for w in args.values():
            if isinstance(w, Window) and w.buf in self.facts.buffers:
                devs |= self.facts.buffer(w.buf).devices
        return sorted(devs) or list(range(self.prog.world))

    def _check_peer(self, e, w, args):
        """Remember a peer index outside the comm domain of the window it reaches."""
        if not isinstance(w, Window):
            w = next((v for v in args.values() if isinstance(v, Window)), None)
        if w is None:
            return
        devs = self.facts.buffer(w.buf).devices if w.buf in self.facts.buffers else ()
        n = len(devs) or self.prog.world
        peer = args["peer"]
        if not 0 <= peer < n:
            self.stray_peers.setdefault(id(e), (e.span, peer, n))

    def _peer(self, w, peer):
        """The world rank a peer index (a rank of the window's comm domain) names."""
        if not isinstance(peer, int) or not isinstance(w, Window):
            return None
        devs = sorted(self.facts.buffer(w.buf).devices) if w.buf in self.facts.buffers else []
        devs = devs or list(range(self.prog.world))
        return devs[peer] if 0 <= peer < len(devs) else None

    @staticmethod
    def _cell(w, offsets):
        if not isinstance(w, Window) or not isinstance(offsets, tuple):
            return None
        offs = tuple(o if isinstance(o, int) else None for o in offsets)
        return Region(w, offs, (1,) * len(offs))

    def _data_region(self, e, args, pname):
        """The elements a data op touches in window ``pname``, or None (unknown)."""
        w = args[pname]
        name = e.record.name
        a = e.args
        if name == "pl.load":
            return _region(w, args.get("offsets"), args.get("shapes"))
        if "remote_load" in name:
            return _region(w, args.get("offsets"), args.get("shape"))
        if name in ("pl.read", "pl.write"):
            offs = args.get("offset")
            return _region(w, offs, (1,) * len(offs) if isinstance(offs, tuple) else None)
        if name in ("pl.store",) or "remote_store" in name:
            src = a.get("tile") or a.get("src") or a.get("src_tile")
            shape = getattr(src.type, "valid_shape", None) or getattr(src.type, "shape", None)
            offs = args.get("offsets")
            if not isinstance(offs, tuple) or shape is None:
                return None
            ext = tuple(shape)[-len(offs):] if len(shape) >= len(offs) else \
                (1,) * (len(offs) - len(shape)) + tuple(shape)
            return _region(w, offs, ext)
        if name in ("pld.tensor.put", "pld.tensor.get"):
            role = "dst" if pname == "dst" else "src"
            if args.get("shape") is None or isinstance(a.get("shape"), N.Const):
                return _whole(w)
            return _region(w, args.get(f"{role}_offsets"), args.get("shape"))
        return _whole(w)


class _Budget(Exception):
    pass


def _region(w, offs, ext):
    if not isinstance(w, Window) or not isinstance(offs, tuple) or not isinstance(ext, tuple):
        return None
    if len(offs) != len(ext) or not all(isinstance(v, int) for v in offs + ext):
        return None
    return Region(w, offs, ext)


def _whole(w):
    if not isinstance(w, Window) or None in w.shape:
        return None
    return Region(w, (0,) * len(w.shape), w.shape)


def _sub_window(w, items):
    """The view ``w[items]``: its base moves to the first element selected."""
    if len(items) > len(w.shape):
        return UNKNOWN
    starts, shape = [], []
    for item, d in itertools.zip_longest(items, w.shape):
        if item is None:
            starts.append(0)
            shape.append(d)
        elif item[0] == "index":
            starts.append(item[1])
        else:
            _, lo, hi = item
            hi = d if hi is None else hi
            starts.append(lo)
            shape.append(hi - lo if isinstance(hi, int) and isinstance(lo, int) else None)
    base = _byte(w, tuple(s if isinstance(s, int) else None for s in starts))
    # a view's elements are strided inside the buffer: only a view of whole
    # trailing rows keeps the simple linear addressing Window assumes
    inner = list(zip(items[1:], w.shape[1:]))
    if any(it[0] == "index" or it[1] != 0 or (it[2] is not None and it[2] != d)
           for it, d in inner if it is not None):
        base = None
    return Window(w.buf, base, tuple(shape), w.itemsize)


def _is_dist(e) -> bool:
    t = getattr(e, "type", None)
    return isinstance(t, TensorType) and bool(t.dist)


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _const(v):
    return v if isinstance(v, (NotifyOp, WaitCmp, AtomicType)) else None


def _binop(op, a, b):
    if not (isinstance(a, int) and isinstance(b, int)):
        return UNKNOWN
    try:
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                "//": lambda: a // b, "%": lambda: a % b, "<<": lambda: a << b,
                ">>": lambda: a >> b, "&": lambda: a & b, "|": lambda: a | b,
                "^": lambda: a ^ b, "**": lambda: a ** b if 0 <= b < 64 else UNKNOWN,
                "min": lambda: min(a, b), "max": lambda: max(a, b)}[op]()
    except (KeyError, ZeroDivisionError):
        return UNKNOWN


def _compare(op, a, b):
    if not (isinstance(a, int) and isinstance(b, int)):
        return UNKNOWN
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
            ">=": a >= b}.get(op, UNKNOWN)


def protocol_facts(prog: N.ProgramIR, facts) -> ProtocolFacts:
    """The events of one abstract execution of ``prog`` (see the module doc)."""
    return ProtocolRun(prog, facts).run()


__all__ = ["COLLECTIVE", "Event", "NOTIFY", "ProtocolFacts", "READ", "REMOTE_READ", "REMOTE_WRITE",
           "Region", "UNKNOWN", "WAIT", "WRITE", "Window", "overlap", "protocol_facts"]
