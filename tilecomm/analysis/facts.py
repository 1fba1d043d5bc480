"""Facts about a built program, computed by one pass over its IR.

The front end only builds typed IR; what the verifier, the runtime tables and
the deadlock report need to know about the program as a whole is derived
here:

* per function, the parameters whose signal cells it may notify (directly or
  through the functions it calls);
* per window buffer, how many ``pld.window`` views are made of it, how many
  HOST dispatches its views reach, the devices those dispatches cover (its
  comm domain), the dtypes it is viewed as and, per device, the functions
  that may notify into it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import nodes as N
from ..ir import walk
from ..ir.kinds import HOST
from ..ir.types import PtrType, TensorType


@dataclass
class BufferFacts:
    views: int = 0
    dispatches: int = 0
    devices: frozenset = frozenset()
    notifiers: dict = field(default_factory=dict)   # device -> set of function names
    dtypes: frozenset = frozenset()                 # of its pld.window views


@dataclass
class HostCollective:
    """A ``pld.tensor.*`` call in a HOST orchestrator and the comm domain it
    runs on (the devices its operands' views are dispatched to; all devices
    when none of them is)."""

    call: N.Call
    operands: dict            # parameter name -> BufferRecord
    domain: frozenset


@dataclass
class ProgramFacts:
    notifies: dict            # FunctionIR -> frozenset of parameter indices
    buffers: dict             # BufferRecord -> BufferFacts
    host_collectives: list = field(default_factory=list)

    def buffer(self, buf) -> BufferFacts:
        return self.buffers[buf]


def _buffer_of(expr):
    t = getattr(expr, "type", None)
    if isinstance(t, TensorType) and t.dist and isinstance(t.origin, N.BufferRecord):
        return t.origin
    return None


def notified_params(prog: N.ProgramIR) -> dict:
    """Function -> parameters whose cells it may notify, directly or through callees."""
    out: dict = {}

    def visit(fn, active):
        if fn in out:
            return out[fn]
        if fn in active:                 # recursion is rejected earlier; stay finite anyway
            return frozenset()
        active.add(fn)
        found = set()
        for e in walk.exprs(fn.body):
            if isinstance(e, N.Call) and e.record.notifies is not None:
                i = walk.param_index(e.args.get(e.record.notifies))
                if i is not None:
                    found.add(i)
            elif isinstance(e, N.FuncCall):
                for j in visit(e.func, active):
                    i = walk.param_index(e.args[j]) if j < len(e.args) else None
                    if i is not None:
                        found.add(i)
        active.discard(fn)
        out[fn] = frozenset(found)
        return out[fn]

    for fn in prog.functions.values():
        visit(fn, set())
    return out


def compute_facts(prog: N.ProgramIR) -> ProgramFacts:
    notifies = notified_params(prog)
    buffers = {b: BufferFacts() for b in prog.buffers}
    for fn in prog.functions.values():
        for e in walk.exprs(fn.body):
            if isinstance(e, N.Call):
                # a view: an op taking the buffer's handle and giving a window tensor of it
                buf = _buffer_of(e)
                if buf is not None and buf in buffers and any(
                        isinstance(a.type, PtrType) and a.type.buffer is buf
                        for a in e.args.values()):
                    buffers[buf].views += 1
                    dt = getattr(e.type, "dtype", None)
                    if dt is not None:
                        buffers[buf].dtypes = buffers[buf].dtypes | {dt.name}
            elif isinstance(e, N.FuncCall) and fn.kind == HOST:
                devices = e.devices or frozenset()
                for j, a in enumerate(e.args):
                    buf = _buffer_of(a)
                    if buf is None or buf not in buffers:
                        continue
                    f = buffers[buf]
                    f.dispatches += 1
                    f.devices = f.devices | devices
                    if j in notifies.get(e.func, ()):
                        for d in devices:
                            f.notifiers.setdefault(d, set()).add(e.func.py_name)
    collectives = _host_collectives(prog, buffers)
    return ProgramFacts(notifies=notifies, buffers=buffers, host_collectives=collectives)


def _host_collectives(prog, buffers) -> list:
    """A HOST collective runs on every member of its operands' domain: it counts
    as a dispatch of each operand to those devices (a synthesized signal,
    dispatched nowhere else, joins the domain of the data it serves)."""
    out = []
    for fn in prog.functions.values():
        if fn.kind != HOST:
            continue
        for e in walk.exprs(fn.body):
            if not (isinstance(e, N.Call) and e.record.collective):
                continue
            ops = {k: b for k, a in e.args.items()
                   if (b := _buffer_of(a)) is not None and b in buffers}
            domain = frozenset().union(*(buffers[b].devices for b in ops.values()))
            out.append(HostCollective(e, ops, domain or frozenset(range(prog.world))))
    for hc in out:
        for b in hc.operands.values():
            f = buffers[b]
            f.dispatches += 1
            if not f.devices:
                f.devices = hc.domain
    return out
