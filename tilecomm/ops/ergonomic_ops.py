"""The ergonomic collectives ``pld.all_reduce`` / ``all_gather`` /
``reduce_scatter`` / ``broadcast`` / ``barrier`` / ``all_to_all`` /
``all_to_all_v``: the HOST ``pld.tensor.*`` collectives with their signal
allocated for the caller.

Each is a form of one ``pld.tensor.*`` record (``expands``): its rule checks
the form's own contract and names the call it becomes, and the front end
writes that call -- with a signal window of the collective's HOST shape,
one per call site, allocated once at the top of the HOST function.  So the
call is checked, lowered, run, recorded and race-checked as the explicit
form is, and its signal is an ordinary window the race check sees.

The contract (upstream's): HOST orchestrators only; ``all_reduce`` in mesh
mode leaves the signal to the allreduce's own synthesis and in ring mode
takes the static rank count ``nranks`` the ring signal is sized by;
``all_to_all_v`` sizes its signal by ``nranks`` too (here it may be left
out: the program's rank count); ``barrier`` takes the caller's signal (it
has no data operand whose ranks a signal of its own could cover).  A call
site's signal is reused by every execution of the call -- inside a loop, on
every iteration -- which the collectives' self-clearing credit barrier makes
safe: each call returns the cells to zero before it returns.
"""
from __future__ import annotations

from ..dtypes import INT32
from ..ir.enums import ReduceOp
from ..ir.kinds import HOST, INCORE, ORCH
from ..ir.types import NONE
from . import collective_ops as C
from .check import describe, is_constant
from .registry import op

WHERE = (HOST,)
HINT = {INCORE: "in a kernel, call the pld.tensor.* collective with an explicit signal window",
        ORCH: "call it in the HOST orchestrator (or the pld.tensor.* collective in a kernel)"}


def _expand(c, target, args, signal=None):
    """The call this one becomes: ``target``'s record with ``args`` (names of
    this call's arguments, or values), plus a signal of shape ``signal``."""
    full = {k: (c.arg(v) if isinstance(v, str) else v) for k, v in args.items()}
    c.extra["expand"] = (target.record, full,
                         None if signal is None else ("signal", signal, INT32))
    return NONE


def _nranks(c, required):
    """``nranks``: a positive compile-time int when given (or ``required``)."""
    if not c.given("nranks"):
        if required:
            c.value_error(f"{c.op}(mode=\"ring\") needs nranks=<rank count>: the ring signal "
                          f"[2*(NR-1)+1, NR] is sized when the program is compiled",
                          code="TC313", at="mode", hint=f"pass nranks={c.world}")
        return c.world
    n = c.const("nranks")
    if not is_constant(c.arg("nranks")) or not isinstance(n, int) or isinstance(n, bool) \
            or n <= 0:
        c.value_error(f"{c.op} nranks must be a positive compile-time int; got "
                      f"{n if is_constant(c.arg('nranks')) else describe(c.type('nranks'))}",
                      code="TC313", at="nranks")
    return n


@op("pld.all_reduce", where=WHERE, expands=C.allreduce.record,
    context_hint=HINT, raises=("TC214", "TC313"))
def all_reduce(target, *, op=ReduceOp.Sum, mode="mesh", nranks=None):
    """``pld.tensor.allreduce`` on the HOST with its signal allocated for the
    call: ``mode="mesh"`` (the allreduce's own ``[ws, 1]`` signal) or
    ``"ring"`` with ``nranks``, the static rank count its
    ``[2*(nranks-1)+1, nranks]`` signal is sized by."""


@all_reduce.rule
def _all_reduce(c):
    mode = c.const("mode")
    if mode not in ("mesh", "ring"):
        c.value_error(f"pld.all_reduce mode must be \"mesh\" or \"ring\", got {mode!r}",
                      code="TC214", at="mode")
    args = {"target": "target", "op": "op", "mode": "mode"}
    if mode == "mesh":
        if c.given("nranks"):
            c.value_error("pld.all_reduce nranks sizes the ring signal only; omit it for "
                          "mode=\"mesh\"", code="TC313", at="nranks")
        return _expand(c, C.allreduce, args)
    n = _nranks(c, required=True)
    return _expand(c, C.allreduce, args, [max(1, 2 * (n - 1) + 1), n])


@op("pld.all_gather", where=WHERE, expands=C.allgather.record, context_hint=HINT, raises=())
def all_gather(local_data, target):
    """``pld.tensor.allgather`` on the HOST with a ``[ws, 1]`` signal allocated
    for the call: row ``r`` of every rank's ``target`` becomes rank ``r``'s
    ``local_data``."""


@all_gather.rule
def _all_gather(c):
    return _expand(c, C.allgather, {"local_data": "local_data", "target": "target"},
                   [c.world, 1])


@op("pld.reduce_scatter", where=WHERE, expands=C.reduce_scatter.record,
    context_hint=HINT, raises=())
def reduce_scatter(target, *, op=ReduceOp.Sum):
    """``pld.tensor.reduce_scatter`` on the HOST with a ``[ws]`` signal
    allocated for the call."""


@reduce_scatter.rule
def _reduce_scatter(c):
    return _expand(c, C.reduce_scatter, {"target": "target", "op": "op"}, [c.world])


@op("pld.broadcast", where=WHERE, expands=C.broadcast.record,
    context_hint=HINT, raises=())
def broadcast(target, *, root):
    """``pld.tensor.broadcast`` on the HOST with a ``[ws]`` signal allocated
    for the call."""


@broadcast.rule
def _broadcast(c):
    return _expand(c, C.broadcast, {"target": "target", "root": "root"}, [c.world])


@op("pld.barrier", where=WHERE, expands=C.barrier.record, context_hint=HINT, raises=())
def barrier(signal):
    """``pld.tensor.barrier`` on the HOST, on the caller's signal: a barrier has
    no data operand whose ranks a signal of its own could cover."""


@barrier.rule
def _barrier(c):
    return _expand(c, C.barrier, {"signal": "signal"})


@op("pld.all_to_all", where=WHERE, expands=C.all_to_all.record, context_hint=HINT, raises=())
def all_to_all(input, target):
    """``pld.tensor.all_to_all`` on the HOST with a ``[ws, 1]`` signal allocated
    for the call."""


@all_to_all.rule
def _all_to_all(c):
    return _expand(c, C.all_to_all, {"input": "input", "target": "target"}, [c.world, 1])


@op("pld.all_to_all_v", where=WHERE, expands=C.all_to_all_v.record,
    context_hint=HINT, raises=("TC313",))
def all_to_all_v(input, target, send_counts, recv_counts, *, nranks=None):
    """``pld.tensor.all_to_all_v`` on the HOST with an ``[nranks, 1]`` signal
    allocated for the call (``nranks``: the static rank count; the program's
    when left out)."""


@all_to_all_v.rule
def _all_to_all_v(c):
    n = _nranks(c, required=False)
    return _expand(c, C.all_to_all_v, {"input": "input", "target": "target",
                                       "send_counts": "send_counts",
                                       "recv_counts": "recv_counts"}, [n, 1])


__all__ = ["all_gather", "all_reduce", "all_to_all", "all_to_all_v", "barrier", "broadcast",
           "reduce_scatter"]
