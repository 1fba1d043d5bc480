"""Asynchronous puts on a rank (``pld.tensor.put_async`` / ``pld.tile.put_async``,
``pld.system.async_session``, ``pld.system.wait_async_event``): the part of the
rank's context (``_rt``) that issues them and completes them.

On the chip an asynchronous put hands the transfer to the DMA engine and
returns an event; the engine reads the source and writes the peer's
destination at some time before the event is waited.  Until that wait the
destination is unsynchronised: a read of it may see the old data or the new,
and a notify that publishes the data before the wait races with the
transfer.  The CPU makes that window observable instead of hiding it: the put
only checks the transfer and records it (``AsyncEvent``), and the transfer
lands -- the source is read and the peer's copy written, through the
transport like a ``pld.tensor.put`` -- when its event is waited, the latest
moment the chip may land it.  A read of the destination between the issue
and the wait therefore sees the old data in a plain run; an explored run
chooses, at each issue, whether the transfer lands there or at the wait
(``exploring.Explorer.after_issue``), so a result that depends on the timing
is found.

Every event must be waited before the kernel that issued it ends (the chip's
contract: the session's scratch buffer and the transfer do not outlive the
kernel).  The lowering opens an ``AsyncFrame`` around each function that
builds a session; its end finds events never waited and fails the rank
(TC508) naming the put that issued them.  A function without a session has
no frame and pays nothing.
"""
from __future__ import annotations

import sys

from ...errors import RuntimeFault
from .tile.kernel_ops import arr
from .touched import transfer

# the granularity the chip's DMA engine moves a transfer in when a session
# does not set one: the CPU moves every transfer in one copy, which gives the
# same bytes (block_bytes changes how the engine chunks, never the result)
DEFAULT_BLOCK_BYTES = 1 << 20


class AsyncSession:
    """A ``pld.system.async_session()``: the DMA session of one kernel call."""

    __slots__ = ("sync_id", "block_bytes", "frame")

    def __init__(self, sync_id, block_bytes, frame):
        self.sync_id = int(sync_id)
        self.block_bytes = int(block_bytes) or DEFAULT_BLOCK_BYTES
        self.frame = frame

    def __repr__(self):
        return f"<async session sync_id={self.sync_id} block_bytes={self.block_bytes}>"


class AsyncEvent:
    """One issued transfer: the peer copy's transport handle and index, the
    source region (read when the transfer lands), the destination view, and
    whether it has landed.  ``where``: the user's line of the issuing put,
    for the error of an event never waited."""

    __slots__ = ("session", "handle", "index", "src", "view", "peer", "landed", "where",
                 "number")

    def __init__(self, session, handle, index, src, view, peer, where, number):
        self.session, self.handle, self.index, self.src = session, handle, index, src
        self.view, self.peer, self.where, self.number = view, peer, where, number
        self.landed = False

    def __repr__(self):
        state = "landed" if self.landed else "in flight"
        return f"<async event {self.number} of a put into rank {self.peer}, {state}>"


class AsyncFrame:
    """The events issued by one call of a function that builds a session, from
    its start to its end (``AsyncTransfers.async_frame``)."""

    __slots__ = ("ctx", "outer", "pending", "issued")

    def __init__(self, ctx, outer):
        self.ctx, self.outer = ctx, outer
        self.pending: list = []
        self.issued = 0

    def close(self) -> None:
        """The function returned: every event it issued must have been waited."""
        self.ctx._async_frame = self.outer
        if self.pending:
            ev = self.pending[0]
            more = len(self.pending) - 1
            raise RuntimeFault(
                f"the kernel ended with {len(self.pending)} asynchronous put(s) whose event was "
                f"never waited: the pld.tensor.put_async at {ev.where} into rank {ev.peer}"
                + (f" and {more} more" if more else "")
                + "; on the chip its transfer may still be in flight", code="TC508",
                hint="wait every event with pld.system.wait_async_event(event, session) before "
                     "the kernel returns (and before the notify that publishes the data)")

    def abandon(self) -> None:
        """The function raised: its events die with it, the error is the story."""
        self.ctx._async_frame = self.outer
        self.pending.clear()


def _issuer_line(ctx) -> str:
    """The user's "file:line" of the lowered code calling into the context
    (read once per issue, only for the message of an event never waited)."""
    image = ctx.image
    f = sys._getframe(2)
    if image is None:
        return "?"
    while f is not None and f.f_code.co_filename != image.filename:
        f = f.f_back
    sp = image.linemap.get(f.f_lineno) if f is not None else None
    return f"{sp.file}:{sp.line}" if sp is not None else "?"


class AsyncTransfers:
    """The ``_rt`` methods of asynchronous puts (mixed into ``RankContext``)."""

    _async_frame = None              # the innermost open AsyncFrame of this thread's context

    def async_frame(self) -> AsyncFrame:
        """Open the frame of a function that builds a session (the lowering
        calls this first, and ``close`` / ``abandon`` at its end)."""
        f = self._async_frame = AsyncFrame(self, self._async_frame)
        return f

    def async_session(self, sync_id=0, block_bytes=0):
        return AsyncSession(sync_id, block_bytes, self._async_frame)

    def tile_async_session(self, scratch, sync_id=0, block_bytes=0):
        # the chip stages the engine's descriptors in the scratch tile; the
        # CPU has no descriptors and leaves it as it was
        return AsyncSession(sync_id, block_bytes, self._async_frame)

    def put_async(self, dst, peer, src, session, dst_offsets=None, src_offsets=None, shape=None):
        """Check and record the transfer; it lands when its event is waited."""
        h = self._member(dst, peer, "pld.tensor.put_async")
        idx, region = transfer("pld.tensor.put_async", dst, arr(src), dst_offsets, src_offsets,
                               shape, True)
        frame = session.frame
        if frame is None or frame is not self._async_frame:
            raise RuntimeFault("pld.tensor.put_async: its session was built by another kernel "
                               "call; a session lives for the call that built it", code="TC509",
                               hint="build the session with pld.system.async_session() in the "
                                    "kernel that issues and waits the puts")
        frame.issued += 1
        ev = AsyncEvent(session, h, idx, region, dst, int(peer), _issuer_line(self),
                        frame.issued)
        frame.pending.append(ev)
        return ev

    def tile_put_async(self, dst, peer, src, session, dst_offsets=None, src_offsets=None,
                       shape=None):
        return self.put_async(dst, peer, src, session, dst_offsets, src_offsets, shape)

    def land(self, event) -> None:
        """Perform ``event``'s transfer now: read its source, write the peer's
        copy (once; a landed event is not moved again)."""
        if event.landed:
            return
        event.landed = True
        self._put(event.view, event.handle, event.index, event.src, 0)

    def wait_async_event(self, event, session):
        """Complete ``event``: its transfer lands if it has not, and everything
        after the wait -- a notify publishing the data -- comes after it."""
        if event.session is not session:
            raise RuntimeFault(f"pld.system.wait_async_event: {event!r} was issued on another "
                               f"session than the one given", code="TC509",
                               hint="wait each event with the session its put was issued on")
        self.land(event)
        frame = session.frame
        if frame is not None and event in frame.pending:
            frame.pending.remove(event)
        return True

    def tile_wait_async_event(self, event, session, scratch):
        return self.wait_async_event(event, session)


__all__ = ["AsyncEvent", "AsyncFrame", "AsyncSession", "AsyncTransfers", "DEFAULT_BLOCK_BYTES"]
