"""``pld.tensor.*`` collectives: one record each.

Every collective may be called in an InCore kernel (the composite runs inside
the kernel) and in a HOST orchestrator (the builtin runs as one dispatch per
member rank of the operands' comm domain).  The rules below are those of the
reference's deducers plus, per path, its signal shapes and operand kinds;
rules that need the program as a whole (comm domains, signal capacity, the
root of an explicit device subset) are verifier rules (``verify/collectives``).
Chip limits apply under the chip platform profiles only, and only where the
CPU could honour more (docs/guide/collectives.md lists them).
"""
from __future__ import annotations

import enum

from ..dtypes import FP16, FP32, INT32
from ..ir import nodes as N
from ..ir.enums import ReduceOp
from ..ir.kinds import HOST, INCORE
from ..ir.types import TensorType, is_static
from ..runtime.controller.orchestrator import HostRuntime
from ..runtime.rank.context import RankContext
from .check import const_value, describe, is_constant
from .registry import op

WHERE = (HOST, INCORE)
EFFECTS = ("read", "write", "remote_read", "remote_write", "signal", "wait")


# ------------------------------------------------------------------ operand helpers
def _on_chip(c) -> bool:
    return c.platform is not None and c.platform.name != "cpu"


def _window(c, name, role):
    """A window operand; on the HOST path it must be a view of an allocation."""
    if c.kind != HOST:
        return c.dist(name, role)
    t = c.type(name)
    if not (isinstance(t, TensorType) and t.dist and isinstance(t.origin, N.BufferRecord)):
        c.type_error(f"{c.op} {role} must be a window-bound DistributedTensor (a view of an "
                     f"alloc_window_buffer) when called from a HOST orchestrator; got "
                     f"{describe(t)}" + (" that is not a pld.window view made here"
                                          if isinstance(t, TensorType) and t.dist else ""),
                     code="TC101",
                     at=name, hint="make the view in this function: pld.window(buf, shape, "
                                   "dtype=...)")
    return t


def _data_operand(c, name, role):
    """``local_data`` / ``input``: a plain Tensor in a kernel, a window on the HOST."""
    if c.kind == HOST:
        return _window(c, name, role)
    t = c.type(name)
    if not isinstance(t, TensorType) or t.dist:
        c.type_error(f"{c.op} {role} must be a plain Tensor inside a kernel; got {describe(t)}",
                     at=name, hint="in a kernel the data comes from a tensor argument; a window "
                                   "operand is only for the HOST builtin")
    return t


def _signal(c, name="signal"):
    t = _window(c, name, name)
    if t.dtype is not INT32:
        c.type_error(f"{c.op} {name} must be an INT32 window (signal cells are 32-bit counters); "
                     f"got {t.dtype.name}", code="TC204", at=name)
    return t


def _shape_error(c, msg, hint=None, name="signal"):
    c.value_error(f"{c.op} {msg}", code="TC220", at=name, hint=hint)


_RING_SHARED = ("a signal shaped for mode=\"ring\" allreduce ([2*(NR-1), NR]) cannot be "
                "shared with this collective")
_RING_HINT = "give the mesh collectives their own [NR, 1] signal"


def _mesh_signal(c, t, *, host_rank1=True, host_rank2=False, name="signal"):
    """Mesh signal shapes: ``[NR, 1]`` in a kernel; on the HOST ``[ws]`` and/or
    ``[ws, 1]`` as the builtin accepts."""
    shape = t.shape
    if c.kind == HOST:
        ok = (len(shape) == 1 and host_rank1) or (len(shape) == 2 and host_rank2)
        if not ok:
            want = " or ".join(w for w, f in (("rank-1 [ws]", host_rank1),
                                              ("rank-2 [ws, 1]", host_rank2)) if f)
            shared = len(shape) == 2 and is_static(shape[1]) and shape[1] != 1
            _shape_error(c, f"HOST builtin signal must be {want}; got {describe(t)}"
                            + (f"; {_RING_SHARED}" if shared else ""),
                         hint=_RING_HINT if shared else None, name=name)
    elif len(shape) != 2:
        _shape_error(c, f"signal must be rank-2 [NR, 1] inside a kernel (one cell per rank); "
                        f"got {describe(t)}", name=name)
    if len(shape) == 2 and is_static(shape[1]) and shape[1] != 1:
        _shape_error(c, f"signal shape[1] must be 1 (one cell per rank), got {shape[1]} "
                        f"({describe(t)}); {_RING_SHARED}", hint=_RING_HINT, name=name)


def _distinct(c, names):
    """Operands that are the same buffer would overwrite each other mid-call."""
    seen = {}
    for n in names:
        a = c.arg(n)
        t = c.type(n)
        if c.kind == HOST:
            key = t.origin if isinstance(t.origin, N.BufferRecord) else None
        else:
            key = t.origin if t.origin is not None else (a.name if isinstance(a, N.Var) else None)
        if key is None:
            continue
        if key in seen:
            what = f"views of the same window buffer '{key.name}'" \
                if isinstance(key, N.BufferRecord) else "the same buffer"
            c.value_error(f"{c.op} {seen[key]} and {n} must be different buffers; both are {what}",
                          code="TC221", at=n, hint="give each operand its own "
                          "alloc_window_buffer" if c.kind == HOST else "use separate tensors")
        seen[key] = n


def _host_loop_rule(c):
    if c.kind == HOST and c.extra.get("in_loop"):
        c.value_error(f"{c.op} is not supported inside a for/while loop in a HOST orchestrator",
                      code="TC311", hint="hoist the call out of the loop")


def _dtype_rule(c, dtype, allowed, what, name):
    if dtype not in allowed:
        c.value_error(f"{c.op} {what} dtype must be {' or '.join(d.name for d in allowed)}, got "
                      f"{dtype.name}", code="TC219", at=name)


def _chip_fp32_only(c, dtype, name):
    """Chip HOST builtins move FP32 only; the CPU moves any dtype."""
    if c.kind == HOST and _on_chip(c) and dtype is not FP32:
        c.value_error(f"HOST {c.op} supports only FP32 data on the {c.platform.name} platform; "
                      f"got {dtype.name}", code="TC215", at=name,
                      hint="platform=\"cpu\" lifts this limit")


def _defer_rule(c):
    """``defer=True``: the split-phase form.  The call sends its data and its
    arrivals and returns; the enclosing pl.at task's TaskId completes when
    every peer has arrived (and the call's epilogue has run), so the result
    is read by tasks ordered after it with ``deps=[tid]``.  Only an InCore
    composite inside a pl.at task has a TaskId to carry that; where in the
    program the call sits is checked by the front end (``deferred_collective``)."""
    d = c.const("defer")
    if not is_constant(c.arg("defer")):
        return                           # static_params reports it (TC216)
    if not isinstance(d, bool):
        c.type_error(f"{c.op} defer must be True or False; got {d!r} ({type(d).__name__})",
                     code="TC105", at="defer")
    if d and c.kind == HOST:
        c.value_error(f"{c.op}(defer=True) is a split-phase InCore composite; a HOST "
                      f"builtin has no TaskId to defer", code="TC332", at="defer",
                      hint="call it inside a `with pl.at(level=pl.Level.CORE_GROUP) as tid:` "
                           "task of a @pl.jit function, or drop defer=True here")
    if d:
        c.extra["deferred"] = True


def _rank2(c, t, name, role):
    if t.rank != 2:
        c.value_error(f"{c.op} {role} must be rank-2 [NR, SIZE]; got {describe(t)}",
                      code="TC201", at=name)


# ------------------------------------------------------------------ allreduce
@op("pld.tensor.allreduce", where=WHERE, kernel=RankContext.allreduce,
    host=HostRuntime.allreduce, effects=EFFECTS, static=("op", "mode", "core_num"),
    collective=True,
    raises=("TC101", "TC204", "TC214", "TC215", "TC216", "TC219", "TC220", "TC221", "TC222",
            "TC225", "TC226", "TC311", "TC312", "TC502", "TC503", "TC507"))
def allreduce(target, signal=None, *, op=ReduceOp.Sum, mode="mesh", core_num=1):
    """Replace every rank's ``target`` by the elementwise reduction (``op``: Sum,
    Max, Min, Prod) over all ranks of its comm domain.  ``mode="mesh"`` (signal
    ``[NR, 1]``) or ``"ring"`` (``[2*(NR-1), NR]``, ``+1`` row on the HOST); in a
    HOST orchestrator the signal may be omitted (one is allocated for the call)
    and ``core_num > 1`` splits the work over signal lanes ``[ws, stride]``."""


@allreduce.rule
def _allreduce(c):
    t = _window(c, "target", "target")
    _dtype_rule(c, t.dtype, (FP16, FP32), "target", "target")
    rop = c.enum("op", ReduceOp)
    mode = c.const("mode")
    if not is_constant(c.arg("mode")):
        c.value_error(f"pld.tensor.allreduce mode must be a compile-time string, \"mesh\" or "
                      f"\"ring\"; got a runtime {describe(c.type('mode'))}", code="TC216",
                      at="mode")
    if mode not in ("mesh", "ring"):
        c.value_error(f"pld.tensor.allreduce mode must be \"ring\" or \"mesh\", got {mode!r}",
                      code="TC214", at="mode")
    cores = c.const("core_num")
    if not isinstance(cores, int) or isinstance(cores, bool):
        got = type(cores).__name__ if cores is not None else describe(c.type("core_num"))
        c.type_error(f"pld.tensor.allreduce core_num must be a positive compile-time int, got "
                     f"{got}", code="TC222", at="core_num")
    if cores <= 0:
        c.value_error(f"pld.tensor.allreduce core_num must be positive, got {cores}",
                      code="TC222", at="core_num")
    if c.kind != HOST and cores != 1:
        c.value_error(f"pld.tensor.allreduce core_num > 1 is supported only in a HOST "
                      f"orchestrator; use an enclosing pl.spmd(...) (got core_num={cores})",
                      code="TC222", at="core_num")
    if mode == "ring" and cores != 1:
        c.value_error(f"HOST pld.tensor.allreduce mode=\"ring\" does not support core_num > 1; "
                      f"got core_num={cores}",
                      code="TC222", at="core_num", hint="use mode=\"mesh\" for several lanes")
    if c.kind == HOST and _on_chip(c) and cores > c.platform.aiv_cores:
        c.value_error(f"pld.tensor.allreduce core_num ({cores}) exceeds the backend AIV core "
                      f"count ({c.platform.aiv_cores}) of the {c.platform.name} platform",
                      code="TC215", at="core_num",
                      hint=f"use at most {c.platform.aiv_cores} lanes; platform=\"cpu\" lifts "
                           f"this limit")
    if "signal" in c.explicit and not c.given("signal"):
        c.type_error("pld.tensor.allreduce signal cannot be None; omit the signal argument for "
                     "host synthesis", code="TC312", at="signal")
    if not c.given("signal"):
        return _synthesized_signal(c, t, mode, cores)
    s = _signal(c)
    _distinct(c, ("target", "signal"))
    if mode == "ring":
        _ring_signal(c, s, rop, t)
    elif c.kind == HOST:
        if len(s.shape) == 1:
            if cores != 1:
                _shape_error(c, f"HOST signal for core_num={cores} must be rank-2 [ws, stride] "
                                f"with stride >= {cores}; got {describe(s)}")
        elif len(s.shape) == 2:
            if not is_static(s.shape[1]) or s.shape[1] < cores:
                _shape_error(c, f"HOST signal [ws, stride] needs a constant stride >= core_num "
                                f"({cores}); got {describe(s)}")
        else:
            _shape_error(c, f"HOST signal must be rank-1 [ws] or rank-2 [ws, stride]; got "
                            f"{describe(s)}")
    else:
        _mesh_signal(c, s)
    return t


def _ring_signal(c, s, rop, t):
    host = c.kind == HOST
    extra = 1 if host else 0
    shape = s.shape
    want = "[2*(NR-1)+1, NR]" if host else "[2*(NR-1), NR]"
    if len(shape) != 2 or not is_static(shape[1]):
        _shape_error(c, f"mode=\"ring\" signal must be rank-2 {want} with NR a compile-time "
                        f"constant; got {describe(s)}")
    nr = shape[1]
    # one rank has no ring rounds, but a window has no zero-size dimension: [1, 1]
    rows = max(1, 2 * (nr - 1) + extra)
    if nr == 1 and shape[0] != rows:
        # [k, 1] is the mesh family's shape, not a ring over one rank
        _shape_error(c, f"mode=\"ring\" signal must be {want}; got {describe(s)}, the mesh "
                        f"signal shape [NR, 1], which cannot be shared with a ring allreduce",
                     hint="give the ring allreduce its own signal "
                          + ("[2*(NR-1)+1, NR]" if host else "[2*(NR-1), NR]"))
    if is_static(shape[0]) and shape[0] != rows:
        _shape_error(c, f"mode=\"ring\" signal shape[0] must equal {rows} "
                        f"({want} for NR={nr}); got {describe(s)}",
                     hint="a mesh signal [NR, 1] cannot be shared with a ring allreduce")
    if host and _on_chip(c):
        if (rop is not ReduceOp.Sum or t.dtype is not FP32):
            c.value_error("builtin.tensor.allreduce_ring currently supports only "
                          "(op=ReduceOp.Sum, dtype=FP32) on the "
                          f"{c.platform.name} platform; got op=ReduceOp.{rop.name}, dtype="
                          f"{t.dtype.name}", code="TC215", at="op",
                          hint="mode=\"mesh\" takes every op and dtype; platform=\"cpu\" "
                               "lifts this limit")
        n = 1
        for d in t.shape:
            n = n * d if is_static(d) and n is not None else None
        if n is None or n % nr:
            c.value_error(f"HOST ring allreduce on the {c.platform.name} platform needs a static "
                          f"element count divisible by NR={nr}; got {describe(t)}",
                          code="TC215", at="target",
                          hint="pad the data to a multiple of NR elements; platform=\"cpu\" "
                               "lifts this limit")


def _synthesized_signal(c, t, mode, cores):
    """HOST only: the front end allocates a ``[ws, core_num]`` signal for the
    call site, once, at the top of the function -- a call in a loop reuses it
    on every iteration, which the self-clearing credit barrier allows."""
    if c.kind != HOST:
        c.type_error("pld.tensor.allreduce requires an explicit signal outside host "
                     "orchestrator functions", code="TC312", at="target",
                     hint="pass a signal window [NR, 1] of INT32")
    if mode != "mesh":
        c.value_error("pld.tensor.allreduce mode=\"ring\" requires an explicit signal; host "
                      "signal synthesis only supports mesh mode", code="TC312", at="mode",
                      hint="pass a ring signal [2*(NR-1)+1, NR]")
    if not c.extra.get("statement_call"):
        c.value_error("pld.tensor.allreduce without a signal must be a statement of its own (an "
                      "assignment, an expression statement or a return), not part of a larger "
                      "expression", code="TC311", hint="pass an explicit signal")
    world = c.world
    c.extra["synthesize"] = ("signal", [world, cores], INT32)
    return t


# ------------------------------------------------------------------ barrier
@op("pld.tensor.barrier", where=WHERE, kernel=RankContext.barrier, host=HostRuntime.barrier,
    effects=("signal", "wait"), static=("defer",), collective=True,
    raises=("TC101", "TC105", "TC204", "TC215", "TC216", "TC220", "TC225", "TC226", "TC332",
            "TC502", "TC503", "TC507"))
def barrier(signal, *, defer=False):
    """No rank returns before every rank of the signal's comm domain has entered;
    window writes before the call are visible to reads after it, on every rank.
    ``defer=True`` (in a pl.at task): the call only arrives; the task's TaskId
    completes when every rank has."""


@barrier.rule
def _barrier(c):
    _defer_rule(c)
    s = _signal(c)
    _mesh_signal(c, s)
    return s


# ------------------------------------------------------------------ broadcast
@op("pld.tensor.broadcast", where=WHERE, kernel=RankContext.broadcast,
    host=HostRuntime.broadcast, effects=EFFECTS, static=("root", "defer"), collective=True,
    raises=("TC101", "TC105", "TC204", "TC215", "TC216", "TC220", "TC221", "TC224", "TC225",
            "TC226", "TC332", "TC501", "TC502", "TC503", "TC507"))
def broadcast(target, signal, *, root, defer=False):
    """Every rank's ``target`` becomes a copy of rank ``root``'s ``target`` as
    staged before the call.  ``defer=True`` (in a pl.at task): the call only
    arrives; the copy is made while the task's TaskId is pending, and the
    TaskId completes once every rank has its copy."""


@broadcast.rule
def _broadcast(c):
    _defer_rule(c)
    t = _window(c, "target", "target")
    s = _signal(c)
    root = c.const("root")
    if not is_constant(c.arg("root")):
        c.value_error(f"pld.tensor.broadcast root must be a compile-time int; got a runtime "
                      f"{describe(c.type('root'))}", code="TC216", at="root",
                      hint="every rank must agree on the root when the program is compiled")
    if not isinstance(root, int) or isinstance(root, (bool, enum.Enum)):
        c.type_error(f"pld.tensor.broadcast root must be an int rank; got {root!r} "
                     f"({type(root).__name__})", code="TC105", at="root")
    if root < 0:
        c.value_error(f"pld.tensor.broadcast root rank must be non-negative, got {root}",
                      code="TC224", at="root")
    _distinct(c, ("target", "signal"))
    _mesh_signal(c, s)
    _chip_fp32_only(c, t.dtype, "target")
    return t


# ------------------------------------------------------------------ allgather
@op("pld.tensor.allgather", where=WHERE, kernel=RankContext.allgather,
    host=HostRuntime.allgather, effects=EFFECTS, static=("defer",), collective=True,
    raises=("TC101", "TC102", "TC105", "TC201", "TC204", "TC208", "TC215", "TC216", "TC220",
            "TC221", "TC225", "TC226", "TC332", "TC502", "TC503", "TC507"))
def allgather(local_data, target, signal, *, defer=False):
    """Row ``r`` of every rank's ``target`` ``[NR, SIZE]`` becomes rank ``r``'s
    ``local_data`` ``[1, SIZE]``.  ``defer=True`` (in a pl.at task): the call
    pushes this rank's row and returns; the task's TaskId completes once
    every row has landed, and tasks that read ``target`` order after it with
    ``deps=[tid]``."""


@allgather.rule
def _allgather(c):
    _defer_rule(c)
    d = _data_operand(c, "local_data", "local_data")
    t = _window(c, "target", "target")
    s = _signal(c)
    _rank2(c, d, "local_data", "local_data")
    if is_static(d.shape[0]) and d.shape[0] != 1:
        c.value_error(f"pld.tensor.allgather input must be [1, SIZE] (this rank's single "
                      f"chunk), got first dim {d.shape[0]}", code="TC208", at="local_data")
    _rank2(c, t, "target", "target")
    if d.dtype is not t.dtype:
        c.type_error(f"pld.tensor.allgather local_data dtype {d.dtype.name} differs from target "
                     f"dtype {t.dtype.name}", code="TC204", at="target")
    if is_static(t.shape[1]) and is_static(d.shape[1]) and t.shape[1] != d.shape[1]:
        c.value_error(f"pld.tensor.allgather target SIZE must equal input SIZE ({t.shape[1]} != "
                      f"{d.shape[1]})", code="TC208", at="target")
    _distinct(c, ("local_data", "target", "signal"))
    _mesh_signal(c, s, host_rank2=True)
    _chip_fp32_only(c, t.dtype, "target")
    return t


# ------------------------------------------------------------------ reduce_scatter
@op("pld.tensor.reduce_scatter", where=WHERE, kernel=RankContext.reduce_scatter,
    host=HostRuntime.reduce_scatter, effects=EFFECTS, static=("op",), collective=True,
    raises=("TC101", "TC201", "TC204", "TC214", "TC215", "TC216", "TC219", "TC220", "TC221",
            "TC225", "TC226", "TC502", "TC503", "TC507"))
def reduce_scatter(target, signal, *, op=ReduceOp.Sum):
    """``target`` is ``[NR, SIZE]``; afterwards row ``r`` of rank ``r`` holds the
    reduction (``op``: Sum, Max, Min, Prod) over ranks of their row ``r``.
    Other rows keep the caller's values.  The chip's HOST builtin reduces by
    Sum only (enforced under the chip profiles)."""


@reduce_scatter.rule
def _reduce_scatter(c):
    t = _window(c, "target", "target")
    s = _signal(c)
    rop = c.enum("op", ReduceOp)
    if rop is not ReduceOp.Sum and c.kind == HOST and _on_chip(c):
        c.value_error(f"HOST pld.tensor.reduce_scatter supports only ReduceOp.Sum on the "
                      f"{c.platform.name} platform; got ReduceOp.{rop.name}", code="TC215",
                      at="op", hint="call it in a kernel (every op there), or "
                                    "platform=\"cpu\" lifts this limit")
    _rank2(c, t, "target", "target")
    if not (t.dtype.is_float or t.dtype.is_int):
        c.value_error(f"pld.tensor.reduce_scatter target must be numeric; got {t.dtype.name}",
                      code="TC219", at="target")
    _distinct(c, ("target", "signal"))
    _mesh_signal(c, s)
    _chip_fp32_only(c, t.dtype, "target")
    return t


# ------------------------------------------------------------------ all_to_all
@op("pld.tensor.all_to_all", where=WHERE, kernel=RankContext.all_to_all,
    host=HostRuntime.all_to_all, effects=EFFECTS, static=("defer",), collective=True,
    raises=("TC101", "TC102", "TC105", "TC201", "TC204", "TC208", "TC215", "TC216", "TC220",
            "TC221", "TC225", "TC226", "TC332", "TC502", "TC503", "TC507"))
def all_to_all(input, target, signal, *, defer=False):
    """Row ``dest`` of each rank's ``input`` ``[NR, SIZE]`` lands in row ``src``
    (the sender) of rank ``dest``'s ``target``.  ``defer=True``: as for
    allgather."""


@all_to_all.rule
def _all_to_all(c):
    _defer_rule(c)
    i = _data_operand(c, "input", "input")
    t = _window(c, "target", "target")
    s = _signal(c)
    _rank2(c, i, "input", "input")
    _rank2(c, t, "target", "target")
    if i.dtype is not t.dtype:
        c.type_error(f"pld.tensor.all_to_all input dtype {i.dtype.name} differs from target "
                     f"dtype {t.dtype.name}", code="TC204", at="target")
    if any(is_static(a) and is_static(b) and a != b for a, b in zip(i.shape, t.shape)):
        c.value_error(f"pld.tensor.all_to_all target shape must equal input shape; got "
                      f"{describe(t)} and {describe(i)}", code="TC208", at="target")
    _distinct(c, ("input", "target", "signal"))
    _mesh_signal(c, s, host_rank2=True)
    _chip_fp32_only(c, t.dtype, "target")
    return t


# ------------------------------------------------------------------ all_to_all_v
@op("pld.tensor.all_to_all_v", where=WHERE, kernel=RankContext.all_to_all_v,
    host=HostRuntime.all_to_all_v, effects=EFFECTS, static=("core_num", "defer"),
    collective=True,
    raises=("TC101", "TC102", "TC105", "TC201", "TC204", "TC208", "TC215", "TC216", "TC220",
            "TC221", "TC222", "TC225", "TC226", "TC311", "TC332", "TC502", "TC503", "TC507"))
def all_to_all_v(input, target, signal, send_counts, recv_counts, *, core_num=1, defer=False):
    """Variable all-to-all over flat ``[NR*MAX_RECV, SIZE]`` layouts: the first
    ``send_counts[dest]`` rows (clamped to ``[0, MAX_RECV]``) of block ``dest``
    of ``input`` go to block ``src`` of rank ``dest``'s ``target``, whose
    other rows keep their value; ``recv_counts[src, 0]`` holds the clamped
    count.  In a HOST orchestrator ``core_num`` (L) asks for that many AIV
    blocks; the call launches ``B = L`` if ``L < NR``, else ``(L // NR) * NR``,
    and the signal ``[NR, stride]`` needs ``stride >= B`` (checked when the
    call runs).  In a kernel ``core_num`` is 1.  ``defer=True``: as for
    allgather (the counts land with the rows)."""


@all_to_all_v.rule
def _all_to_all_v(c):
    _defer_rule(c)
    i = _data_operand(c, "input", "input")
    t = _window(c, "target", "target")
    s = _signal(c)
    if c.kind == HOST:
        sc = _window(c, "send_counts", "send_counts")
    else:
        sc = c.tensor("send_counts", "send_counts")
    rc = _window(c, "recv_counts", "recv_counts")
    _host_loop_rule(c)
    _rank2(c, i, "input", "input")
    _rank2(c, t, "target", "target")
    if i.dtype is not t.dtype:
        c.type_error(f"pld.tensor.all_to_all_v input dtype {i.dtype.name} differs from target "
                     f"dtype {t.dtype.name}", code="TC204", at="target")
    if is_static(i.shape[1]) and is_static(t.shape[1]) and i.shape[1] != t.shape[1]:
        c.value_error(f"pld.tensor.all_to_all_v input and target must have the same SIZE "
                      f"(shape[1]); got {i.shape[1]} and {t.shape[1]}", code="TC208", at="target")
    cores = c.const("core_num")
    if not isinstance(cores, int) or isinstance(cores, bool) or cores <= 0:
        c.type_error(f"pld.tensor.all_to_all_v core_num must be a positive compile-time int, "
                     f"got {cores!r}", code="TC222", at="core_num")
    if c.kind != HOST and cores != 1:
        c.value_error(f"pld.tensor.all_to_all_v core_num > 1 is supported only in a HOST "
                      f"orchestrator; in a kernel it is 1 (got core_num={cores})",
                      code="TC222", at="core_num")
    if c.kind == HOST and _on_chip(c) and cores > c.platform.aiv_cores:
        c.value_error(f"pld.tensor.all_to_all_v core_num ({cores}) exceeds the backend AIV "
                      f"core count ({c.platform.aiv_cores}) of the {c.platform.name} platform",
                      code="TC215", at="core_num",
                      hint="platform=\"cpu\" lifts this limit")
    if len(s.shape) != 2:
        _shape_error(c, f"signal must be rank-2 [NR, 1]; got {describe(s)}")
    if not is_static(s.shape[1]) or cores == 1 and s.shape[1] != 1:
        _shape_error(c, f"signal shape[1] must be 1 (one cell per rank), got {s.shape[1]} "
                        f"({describe(s)}); {_RING_SHARED}", hint=_RING_HINT)
    nr = s.shape[0]
    if not is_static(nr) or not is_static(t.shape[0]):
        c.value_error("pld.tensor.all_to_all_v needs compile-time constant target.shape[0] and "
                      f"signal.shape[0]; got {describe(t)} and {describe(s)}", code="TC216",
                      at="signal")
    if nr <= 0:
        _shape_error(c, f"signal.shape[0] must be positive (one cell per rank); got {nr}")
    if t.shape[0] % nr:
        c.value_error(f"pld.tensor.all_to_all_v signal.shape[0] ({nr}) must divide "
                      f"target.shape[0] ({t.shape[0]}): target is [NR*MAX_RECV, SIZE]",
                      code="TC208", at="target")
    for name, x in (("send_counts", sc), ("recv_counts", rc)):
        if x.dtype is not INT32:
            c.type_error(f"pld.tensor.all_to_all_v {name} must be INT32; got {x.dtype.name}",
                         code="TC204", at=name)
        if not (x.rank == 1 or x.rank == 2 and x.shape[1] == 1):
            c.value_error(f"pld.tensor.all_to_all_v {name} must be [NR] or [NR, 1]; got "
                          f"{describe(x)}", code="TC208", at=name)
        if name == "recv_counts" and x.rank != 2:
            c.value_error(f"pld.tensor.all_to_all_v recv_counts must be [NR, 1]; got "
                          f"{describe(x)}", code="TC208", at=name)
        if not is_static(x.shape[0]):
            c.value_error(f"pld.tensor.all_to_all_v {name}.shape[0] must be a compile-time "
                          f"constant equal to signal.shape[0] ({nr}); got {describe(x)}",
                          code="TC216", at=name)
        if x.shape[0] != nr:
            c.value_error(f"pld.tensor.all_to_all_v {name}.shape[0] ({x.shape[0]}) must equal "
                          f"signal.shape[0] ({nr})", code="TC208", at=name)
    _distinct(c, ("input", "target", "signal", "send_counts", "recv_counts"))
    _chip_fp32_only(c, t.dtype, "target")
    return t


__all__ = ["allreduce", "barrier", "broadcast", "allgather", "reduce_scatter", "all_to_all",
           "all_to_all_v", "const_value"]
