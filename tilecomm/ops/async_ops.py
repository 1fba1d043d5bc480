"""Asynchronous puts: ``pld.system.async_session``, ``pld.tensor.put_async``,
``pld.system.wait_async_event`` and their tile forms.

The contracts are upstream PyPTO's, each a limit of the chip's DMA engine:
the moved region is static, flat-contiguous and logically 1-D; there is no
``atomic`` form (the engine's async put has no combine); a session's
``sync_id`` is a 3-bit flag id (0..7) and its ``block_bytes`` a positive
chunk size (0 selects the 1 MiB default).  The runtime is in
``runtime/rank/async_puts.py``.
"""
from __future__ import annotations

from ..dtypes import BOOL
from ..ir.effects import reads, remote_writes
from ..ir.kinds import INCORE
from ..ir.types import (AsyncEventType, AsyncSessionType, ScalarType, TensorType, TileType,
                        is_static)
from ..runtime.rank import touched as T
from ..runtime.rank.context import RankContext
from .check import describe
from .pld_ops import _region_rule
from .registry import op

KERNEL = (INCORE,)
# the parameters an async put's regions are computed from
_TRANSFER = ("dst", "src", "dst_offsets", "src_offsets", "shape")
MAX_SYNC_ID = 7                  # the engine's sync flag id is 3 bits


# ------------------------------------------------------------------ sessions
def _session_options(c) -> None:
    if c.platform is not None and not c.platform.async_dma:
        c.value_error(f"{c.op}: asynchronous puts need the a2a3 chip's DMA engine; this program "
                      f"is checked for '{c.platform.name}'", code="TC215",
                      hint="use pld.tensor.put on this platform, or check for platform='a2a3'")
    for k in ("sync_id", "block_bytes"):
        v = c.const(k, 0 if not c.given(k) else None)
        if not isinstance(v, int) or isinstance(v, bool):
            c.type_error(f"{c.op} {k} must be an int (static); got "
                         f"{describe(c.type(k)) if v is None else type(v).__name__}",
                         code="TC105", at=k)
    sync_id, block = c.const("sync_id", 0), c.const("block_bytes", 0)
    if not 0 <= sync_id <= MAX_SYNC_ID:
        c.value_error(f"{c.op} sync_id must be in [0, {MAX_SYNC_ID}]; got {sync_id}",
                      code="TC243", at="sync_id",
                      hint="the DMA engine's sync flag id is 3 bits; an id above 7 builds an "
                           "invalid session on the chip")
    if block < 0:
        c.value_error(f"{c.op} block_bytes must be positive (0 selects the 1 MiB default); got "
                      f"{block}", code="TC243", at="block_bytes",
                      hint="block_bytes is the chunk size the DMA engine moves a transfer in")


def _scratch(c) -> None:
    t = c.type("scratch")
    if not isinstance(t, TileType):
        c.type_error(f"{c.op} scratch must be a Tile (the session's staging buffer); got "
                     f"{describe(t)}", at="scratch",
                     hint="make one with pl.tile.create([1, 256], dtype=pl.INT8)")


@op("pld.system.async_session", where=KERNEL, kernel=RankContext.async_session,
    static=("sync_id", "block_bytes"),
    raises=("TC105", "TC215", "TC216", "TC243", "TC508"))
def async_session(*, sync_id=0, block_bytes=0):
    """Build the DMA session asynchronous puts are issued on and their events
    waited on (one per kernel call; every event must be waited before the
    kernel returns, TC508 otherwise).  ``sync_id`` (0..7) picks the engine's
    sync flag, ``block_bytes`` the chunk size a transfer moves in (0: 1 MiB;
    on the CPU a transfer moves in one copy, with the same result)."""


@async_session.rule
def _async_session(c):
    _session_options(c)
    return AsyncSessionType()


@op("pld.tile.async_session", where=KERNEL, kernel=RankContext.tile_async_session,
    static=("sync_id", "block_bytes"),
    raises=("TC102", "TC105", "TC215", "TC216", "TC243", "TC508"))
def tile_async_session(scratch, *, sync_id=0, block_bytes=0):
    """``pld.system.async_session`` with the session's scratch tile given (the
    form the chip's lowering produces; the CPU leaves the tile as it was)."""


@tile_async_session.rule
def _tile_async_session(c):
    _scratch(c)
    _session_options(c)
    return AsyncSessionType()


# ------------------------------------------------------------------ the put
def _session_operand(c, name="session") -> None:
    t = c.type(name)
    if not isinstance(t, AsyncSessionType):
        c.type_error(f"{c.op} expects {name} to be an AsyncSession (output of "
                     f"pld.system.async_session); got {describe(t)}", at=name)


def _flat_1d(c, extents, dims, role, at) -> None:
    """The region ``extents`` of a tensor of shape ``dims`` is one contiguous
    run of elements: at most one extent above 1, and every dimension inside
    that one of size 1 in the tensor."""
    big = [i for i, e in enumerate(extents) if e != 1]
    inner = dims[big[-1] + 1:] if big else ()
    if len(big) > 1 or any(d != 1 for d in inner):
        c.value_error(f"{c.op} moves a flat-contiguous logical-1D region only: the {role} region "
                      f"{list(extents)} of a {list(dims)} tensor is not one contiguous run",
                      code="TC242", at=at,
                      hint="move one row at a time ([1, n] regions), or use pld.tensor.put "
                           "for a 2-D region")


def _put_async_rule(c):
    dst = c.dist("dst", "dst")
    s = c.type("src")
    if not isinstance(s, TensorType):
        c.type_error(f"{c.op} expects a Tensor or DistributedTensor src; got {describe(s)}",
                     at="src")
    c.integer("peer")
    _session_operand(c)
    given = [c.given(k) for k in ("dst_offsets", "src_offsets", "shape")]
    region = all(given)
    # the chip's async engine has no chunking: every extent is fixed when the
    # program is compiled (checked first: the put / get rule would ask for a
    # chunk size, which this op does not have)
    for role, t in (("dst", dst), ("src", s)):
        if t.shape is not None and not all(is_static(d) for d in t.shape) and not region:
            c.value_error(f"{c.op} needs a fully static transfer; the {role} window has shape "
                          f"{describe(t)}", code="TC242", at=role,
                          hint="give dst_offsets, src_offsets and a static shape")
    if region:
        shp = c.const("shape")
        if isinstance(shp, list) and any(not isinstance(v, int) for v in shp):
            c.value_error(f"{c.op} needs a fully static transfer: shape must be compile-time "
                          f"integers", code="TC242", at="shape")
    _region_rule(c)
    if region:
        shp = c.const("shape")
        _flat_1d(c, shp, dst.shape, "dst", "shape")
        _flat_1d(c, shp, s.shape, "src", "shape")
    else:
        _flat_1d(c, dst.shape, dst.shape, "dst", "dst")
    return AsyncEventType()


_PUT_ASYNC_RAISES = ("TC101", "TC102", "TC201", "TC202", "TC204", "TC205", "TC208", "TC210",
                     "TC218", "TC242", "TC501", "TC502", "TC503", "TC509")


@op("pld.tensor.put_async", where=KERNEL, kernel=RankContext.put_async,
    effects=("read", "remote_write"), untracked=("dst",), asynchronous="issue",
    touches=(reads("src", T.put_local, _TRANSFER),
             remote_writes("dst", T.put_remote, _TRANSFER)),
    raises=_PUT_ASYNC_RAISES)
def put_async(dst, peer, src, session, dst_offsets=None, src_offsets=None, shape=None):
    """Issue a copy of local ``src`` into rank ``peer``'s copy of window ``dst``
    on ``session`` and return its event at once -- whole tensors, or
    ``src[src_offsets:+shape]`` into ``dst[dst_offsets:+shape]``; the region
    must be static, flat-contiguous and logically 1-D.  The destination is
    unsynchronised until ``pld.system.wait_async_event(event, session)``:
    wait before the notify that publishes the data, and before the kernel
    ends.  No ``atomic`` form: use ``pld.tensor.put`` to accumulate."""


put_async.rule(_put_async_rule)


@op("pld.tile.put_async", where=KERNEL, kernel=RankContext.tile_put_async,
    effects=("read", "remote_write"), untracked=("dst",), asynchronous="issue",
    touches=(reads("src", T.put_local, _TRANSFER),
             remote_writes("dst", T.put_remote, _TRANSFER)),
    raises=_PUT_ASYNC_RAISES)
def tile_put_async(dst, peer, src, session, dst_offsets=None, src_offsets=None, shape=None):
    """``pld.tensor.put_async`` as the chip's lowering writes it (with a
    session from ``pld.tile.async_session``); unlike ``pld.tile.put`` it
    takes no staging tile: the engine copies memory to memory."""


tile_put_async.rule(_put_async_rule)


# ------------------------------------------------------------------ the wait
def _wait_rule(c):
    t = c.type("event")
    if not isinstance(t, AsyncEventType):
        c.type_error(f"{c.op} expects event to be an AsyncEvent (output of "
                     f"pld.tensor.put_async); got {describe(t)}", at="event")
    _session_operand(c)
    return ScalarType(BOOL)


@op("pld.system.wait_async_event", where=KERNEL, kernel=RankContext.wait_async_event,
    asynchronous="complete", raises=("TC102", "TC509"))
def wait_async_event(event, session):
    """Block until ``event``'s transfer has landed and return True: what
    follows -- the notify that publishes the data -- comes after it."""


wait_async_event.rule(_wait_rule)


@op("pld.tile.wait_async_event", where=KERNEL, kernel=RankContext.tile_wait_async_event,
    asynchronous="complete", raises=("TC102", "TC509"))
def tile_wait_async_event(event, session, scratch):
    """``pld.system.wait_async_event`` with the session's scratch tile given
    (the chip reads the completion word through it)."""


@tile_wait_async_event.rule
def _tile_wait(c):
    _scratch(c)
    return _wait_rule(c)


__all__ = ["async_session", "put_async", "tile_async_session", "tile_put_async",
           "tile_wait_async_event", "wait_async_event"]
